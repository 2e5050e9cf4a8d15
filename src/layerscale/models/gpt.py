"""A GPT-style causal language model (Radford et al. 2019; layout after nanoGPT) with LayerScale.

``wte(tokens) + wpe(positions) → depth × causal block → norm → logits = h · wteᵀ`` (output weights tied to the
token embedding, so the state dict holds them once). Byte-level vocabulary of 256 by default.
"""

from __future__ import annotations

import math
import numbers

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
from .validation import MAX_BLOCK_SIZE, MAX_VOCAB_SIZE, check_bool, check_positive_int

__all__ = ["GPT"]

_TOKEN_DTYPES = (torch.int64, torch.int32)


class GPT(GradCheckpointing, TimmModelAPI, HubMixin, nn.Module):
    """Causal transformer LM: ``forward(tokens (B, T) int64) -> logits (B, T, vocab_size)``, ``T ≤ block_size``,
    every id in ``[0, vocab_size)`` (else a one-line ``ValueError``; checked on the CPU, where it costs one
    min/max, and by :meth:`generate` everywhere, not per step on a GPU, where it would wait for the device);
    ``block_size`` and ``vocab_size`` are at most :data:`~layerscale.models.validation.MAX_BLOCK_SIZE` and
    :data:`~layerscale.models.validation.MAX_VOCAB_SIZE`, ``qkv_bias`` True or False.

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
        check_positive_int("vocab_size", vocab_size, MAX_VOCAB_SIZE)
        check_positive_int("block_size", block_size, MAX_BLOCK_SIZE)
        qkv_bias = check_bool("qkv_bias", qkv_bias)
        init_value, method, norm_layer = resolve_trunk_args(
            depth=depth, embed_dim=embed_dim, num_heads=num_heads, drop_rate=drop_rate, residual=residual,
            norm=norm, norm_eps=norm_eps, init_value=init_value, init_values=init_values,
            attn_drop_rate=attn_drop_rate, mlp_ratio=mlp_ratio)
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
        self.stream_reduce = method.stream_reduction(embed_dim)  # None but for AttnRes's output aggregation
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-initialise every parameter (usable after ``to_empty()`` from the meta device)."""
        init_transformer_weights(self)
        self.residual_method.prepare_model(self)

    def _embed_tokens(self, tokens: torch.Tensor) -> torch.Tensor:
        """``(B, T)`` token ids → ``(B, T, D)`` token plus position embeddings, before the blocks."""
        if tokens.dim() != 2 or tokens.dtype not in _TOKEN_DTYPES:
            raise ValueError(f"expected integer tokens of shape (B, T), got {tuple(tokens.shape)} {tokens.dtype}")
        T = tokens.shape[1]
        if T > self.block_size:
            raise ValueError(f"sequence length {T} exceeds block_size {self.block_size}")
        if tokens.device.type == "cpu":  # on a GPU the check would be a host sync every step (generate checks once)
            self._check_token_ids(tokens)
        positions = torch.arange(T, device=tokens.device)
        return self.drop(self.wte(tokens) + self.wpe(positions))

    def _check_token_ids(self, tokens: torch.Tensor) -> None:
        """A one-line ``ValueError`` when an id is outside ``[0, vocab_size)`` (the embedding would raise torch's
        "index out of range", or a device-side assert on a GPU): one min/max over the ids. Skipped when there is
        nothing to read: no ids, shapes only (``meta``), or inside ``torch.compile`` (a data-dependent branch)."""
        if tokens.numel() == 0 or tokens.device.type == "meta" or torch.compiler.is_compiling():
            return
        low, high = torch.stack(torch.aminmax(tokens)).tolist()
        if low < 0 or high >= self.vocab_size:
            raise ValueError(f"token ids must be in [0, {self.vocab_size}) (vocab_size {self.vocab_size}), got ids "
                             f"from {low} to {high}")

    def forward_features(self, tokens: torch.Tensor) -> torch.Tensor:
        """``(B, T)`` token ids → ``(B, T, D)`` normalised hidden states."""
        stream = self._run_blocks(self.blocks, self.residual_method.expand_stream(self._embed_tokens(tokens)))
        x = self._reduce_stream(stream)
        return x if self.norm is None else self.norm(x)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Next-token logits ``(B, T, vocab_size)``."""
        return F.linear(self.forward_features(tokens), self.wte.weight)

    @torch.no_grad()
    def generate(self, tokens: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
                 generator: torch.Generator | None = None) -> torch.Tensor:
        """Sample ``max_new_tokens`` continuations (multinomial at ``temperature``; 0 means greedy).

        ``tokens``: the prompt, integer ids of shape ``(B, T)`` with ``B, T >= 1``, each in ``[0, vocab_size)``;
        ``max_new_tokens``: an int >= 0 (0 returns the prompt); ``temperature``: a finite number >= 0. Anything else
        is a one-line ``ValueError``. Returns ``(B, T + max_new_tokens)``.
        """
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, numbers.Integral) or max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be an int >= 0, got {max_new_tokens!r}")
        if (isinstance(temperature, (bool, str, bytes)) or not isinstance(temperature, numbers.Real)
                or not math.isfinite(temperature) or temperature < 0):
            raise ValueError(f"temperature must be a finite number >= 0 (0: greedy), got {temperature!r}")
        if (not isinstance(tokens, torch.Tensor) or tokens.dim() != 2 or 0 in tokens.shape
                or tokens.dtype not in _TOKEN_DTYPES):
            got = f"{tuple(tokens.shape)} {tokens.dtype}" if isinstance(tokens, torch.Tensor) else type(tokens).__name__
            raise ValueError(f"generate expects a prompt of integer token ids of shape (B, T) with B, T >= 1, "
                             f"got {got}")
        self._check_token_ids(tokens)
        for _ in range(max_new_tokens):
            logits = self(tokens[:, -self.block_size:])[:, -1]
            if temperature == 0:
                nxt = logits.argmax(-1, keepdim=True)
            else:
                nxt = torch.multinomial((logits / temperature).softmax(-1), 1, generator=generator)
            tokens = torch.cat((tokens, nxt), dim=1)
        return tokens
