"""Building blocks: LayerScale family, attention variants, MLP, stochastic depth, transformer blocks."""

from .attention import Attention, ClassAttention, TalkingHeadAttention
from .block import Block, ClassAttentionBlock
from .drop_path import DropPath, drop_path_rates
from .layer_scale import HeadScale, LayerScale, LayerScale2d, ScalarScale, check_init_value, init_value_for_depth
from .mlp import Mlp
from .norms import layer_norm
from .patch_embed import PatchEmbed

__all__ = [
    "Attention", "Block", "ClassAttention", "ClassAttentionBlock", "DropPath", "HeadScale", "LayerScale",
    "LayerScale2d", "Mlp", "PatchEmbed", "ScalarScale", "TalkingHeadAttention", "check_init_value",
    "drop_path_rates", "init_value_for_depth", "layer_norm",
]
