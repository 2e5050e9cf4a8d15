"""Model families (ViT / DeiT III, CaiT, GPT) and the by-name registry."""

from .cait import CaiT
from .compile import compile_blocks
from .gpt import GPT
from .registry import create_model, list_models, model_defaults
from .vit import VisionTransformer

__all__ = ["CaiT", "GPT", "VisionTransformer", "compile_blocks", "create_model", "list_models", "model_defaults"]
