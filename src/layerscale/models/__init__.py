"""Model families (ViT / DeiT III, CaiT, GPT) and the by-name registry."""

from .cait import CaiT
from .gpt import GPT
from .registry import create_model, list_models, model_defaults
from .vit import VisionTransformer

__all__ = ["CaiT", "GPT", "VisionTransformer", "create_model", "list_models", "model_defaults"]
