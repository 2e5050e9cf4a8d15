"""Stabilisation methods for residual branches."""
