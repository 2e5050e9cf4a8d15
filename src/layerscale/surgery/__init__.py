"""Model surgery: fold LayerScale into the preceding linear layers for deployment, or retrofit LayerScale into a
model that lacks it (ours, timm ViT, Hugging Face ViT). Usage::

    deployed = fold_layerscale(model, inplace=False)   # same outputs, no scales left
    add_layerscale(timm_vit, init_value=1e-5)           # every block starts near the identity
"""

from .fold import fold_layerscale, scale_modules
from .fold_state_dict import fold_state_dict
from .retrofit import add_layerscale
from .scaled_linear import LayerScaledLinear

__all__ = ["LayerScaledLinear", "add_layerscale", "fold_layerscale", "fold_state_dict", "scale_modules"]
