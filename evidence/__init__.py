"""This repository's own evidence pipelines (not shipped in the wheel)."""
