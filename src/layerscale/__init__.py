"""torch-layerscale: train deeper transformers that stay stable.

LayerScale (Touvron et al. 2021, CaiT, arXiv 2103.17239) multiplies each residual branch by a learnable per-channel
γ initialised near zero, ``x + γ ⊙ F(LN(x))``, so deep Pre-LN transformers start near the identity.
"""

from .layers import (
    Block, ClassAttentionBlock, HeadScale, LayerScale, LayerScale2d, ScalarScale, init_value_for_depth,
)
from .models import CaiT, GPT, VisionTransformer, create_model, list_models
from .interop import convert_state_dict, export_state_dict, load_pretrained_into
from .residual import get_residual, list_residuals
from .surgery import add_layerscale, fold_layerscale
from .train.param_groups import param_groups

__version__ = "0.1.0"

__all__ = [
    "Block", "CaiT", "ClassAttentionBlock", "GPT", "HeadScale", "LayerScale", "LayerScale2d", "ScalarScale",
    "VisionTransformer", "create_model", "get_residual", "init_value_for_depth", "list_models", "list_residuals",
    "param_groups", "__version__",
    "add_layerscale", "convert_state_dict", "export_state_dict", "fold_layerscale", "load_pretrained_into",
]
