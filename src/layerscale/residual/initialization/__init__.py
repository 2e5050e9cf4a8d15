"""Trainable by initialisation alone (T-Fixup), and the initialisations other methods reuse: PyTorch's defaults
(ReZero, SkipInit) and the per-block Xavier gain (T-Fixup, DeepNorm)."""
