"""Integrations with the tools users already train with: timm's registry and model interface, the Hugging Face
Hub layout and causal language models, and a Lightning callback. Each module imports its peer library only when
used, so none of them is a dependency of ``import layerscale``."""
