"""A GPT-style causal language model (Radford et al. 2019; layout after nanoGPT) with LayerScale.

``wte(tokens) + wpe(positions) → depth × causal block → norm → logits = h · wteᵀ`` (output weights tied to the
token embedding, so the state dict holds them once). Byte-level vocabulary of 256 by default.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .hub_mixin import HubMixin
from ..layers.block import Block
from ..layers.drop_path import drop_path_rates
from .checkpointing import GradCheckpointing, check_grad_checkpointing
from .init import init_transformer_weights
from .timm_api import TimmModelAPI
from .trunk_args import resolve_trunk_args
from .validation import check_positive_int

__all__ = ["GPT"]


class GPT(GradCheckpointing, TimmModelAPI, HubMixin, nn.Module):
    """Causal transformer LM: ``forward(tokens (B, T) int64) -> logits (B, T, vocab_size)``, ``T ≤ block_size``.

    ``norm="rmsnorm"`` builds every norm as RMSNorm instead of LayerNorm (``docs/methods.md``).
    ``grad_checkpointing=True`` recomputes each block in the backward (see :meth:`set_grad_checkpointing`).
    ``no_weight_decay``, ``num_features``, ``forward_intermediates`` (token format ``NLC``) and timm's
    ``init_values`` come from :class:`~layerscale.models.timm_api.TimmModelAPI`; ``save_pretrained`` /
    ``from_pretrained`` from :class:`~layerscale.models.hub_mixin.HubMixin`.
    """

    _cfg_defaults = dict(first_conv=None, classifier=None)

    def __init__(self, vocab_size: int = 256, block_size: int = 256, embed_dim: int = 384, depth: int = 6,
                 num_heads: int = 6, mlp_ratio: float = 4.0, qkv_bias: bool = True, residual: str = "layerscale",
                 init_value: float | None = None, ls_placement: str = "both", drop_rate: float = 0.0,
                 attn_drop_rate: float = 0.0, drop_path_rate: float = 0.0, drop_path_schedule: str = "linear",
                 norm_eps: float = 1e-5, grad_checkpointing: bool = False, init_values: float | None = None,
                 norm: str = "layernorm") -> None:
        super().__init__()
        self.grad_checkpointing = check_grad_checkpointing(grad_checkpointing)
        check_positive_int("vocab_size", vocab_size)
        check_positive_int("block_size", block_size)
        init_value, method, norm_layer = resolve_trunk_args(
            depth=depth, embed_dim=embed_dim, num_heads=num_heads, drop_rate=drop_rate, residual=residual,
            norm=norm, norm_eps=norm_eps, init_value=init_value, init_values=init_values)
        self.vocab_size, self.block_size, self.embed_dim, self.depth = vocab_size, block_size, embed_dim, depth
        self.residual = method.name
        self.residual_method = method  # its stream hooks (multi-stream methods) and prepare_model (Admin)
        self.wte = nn.Embedding(vocab_size, embed_dim)
        self.wpe = nn.Embedding(block_size, embed_dim)
        self.drop = nn.Dropout(drop_rate)
        rates = drop_path_rates(depth, drop_path_rate, drop_path_schedule)
        self.blocks = nn.Sequential(*[
            Block(embed_dim, num_heads, mlp_ratio, qkv_bias, residual=method, index=i + 1, depth=depth,
                  init_value=init_value, ls_placement=ls_placement, norm_layer=norm_layer, causal=True,
                  drop=drop_rate, attn_drop=attn_drop_rate, drop_path=rates[i], kind="decoder")
            for i in range(depth)
        ])
        self.norm = method.final_norm(norm_layer, embed_dim)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-initialise every parameter (usable after ``to_empty()`` from the meta device)."""
        init_transformer_weights(self)
        self.residual_method.prepare_model(self)

    def _embed_tokens(self, tokens: torch.Tensor) -> torch.Tensor:
        """``(B, T)`` token ids → ``(B, T, D)`` token plus position embeddings, before the blocks."""
        if tokens.dim() != 2 or tokens.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"expected integer tokens of shape (B, T), got {tuple(tokens.shape)} {tokens.dtype}")
        T = tokens.shape[1]
        if T > self.block_size:
            raise ValueError(f"sequence length {T} exceeds block_size {self.block_size}")
        positions = torch.arange(T, device=tokens.device)
        return self.drop(self.wte(tokens) + self.wpe(positions))

    def forward_features(self, tokens: torch.Tensor) -> torch.Tensor:
        """``(B, T)`` token ids → ``(B, T, D)`` normalised hidden states."""
        stream = self._run_blocks(self.blocks, self.residual_method.expand_stream(self._embed_tokens(tokens)))
        x = self.residual_method.reduce_stream(stream)
        return x if self.norm is None else self.norm(x)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Next-token logits ``(B, T, vocab_size)``."""
        return F.linear(self.forward_features(tokens), self.wte.weight)

    @torch.no_grad()
    def generate(self, tokens: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
                 generator: torch.Generator | None = None) -> torch.Tensor:
        """Sample ``max_new_tokens`` continuations (multinomial at ``temperature``; 0 means greedy)."""
        for _ in range(max_new_tokens):
            logits = self(tokens[:, -self.block_size:])[:, -1]
            if temperature == 0:
                nxt = logits.argmax(-1, keepdim=True)
            else:
                nxt = torch.multinomial((logits / temperature).softmax(-1), 1, generator=generator)
            tokens = torch.cat((tokens, nxt), dim=1)
        return tokens
