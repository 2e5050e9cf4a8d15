"""torch-layerscale: train deeper transformers that stay stable."""

__version__ = "0.1.0"
