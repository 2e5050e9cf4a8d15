"""Model surgery: fold LayerScale into the preceding linear layers for deployment, or retrofit LayerScale into a
model that lacks it (ours, timm ViT, Hugging Face ViT); change a model's depth in either direction (grow, prune) through
one block-list editor per model family (:mod:`layerscale.surgery.block_list`). Usage::

    deployed = fold_layerscale(model, inplace=False)   # same outputs, no scales left
    add_layerscale(timm_vit, init_value=1e-5)           # every block starts near the identity
    deeper = grow(model, insert=4, where="every:3")     # 4 new blocks at γ = 0: the same function exactly
    shallower = prune(model, blocks=[5, 9])             # blocks 5 and 9 removed
"""

from .folding.fold import fold_layerscale, scale_modules
from .folding.fold_state_dict import fold_state_dict
from .growth.grow import grow
from .growth.new_blocks import freeze_all_but_new_blocks
from .pruning.prune import prune
from .retrofit import add_layerscale
from .scaled_linear import LayerScaledLinear

__all__ = ["LayerScaledLinear", "add_layerscale", "fold_layerscale", "fold_state_dict", "freeze_all_but_new_blocks",
           "grow", "prune", "scale_modules"]
