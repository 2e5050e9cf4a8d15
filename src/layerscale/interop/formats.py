"""The checkpoint formats we read and write, by name, and how a checkpoint's format is recognised from its keys."""

from __future__ import annotations

import re
from typing import Mapping

from .deit3_official import DEIT3_OFFICIAL
from .hf_dinov2 import HF_DINOV2
from .rules import KeyFormat, format_keys
from .timm_cait import TIMM_CAIT
from .timm_vit import TIMM_VIT

__all__ = ["CANONICAL", "FORMATS", "ALIASES", "list_formats", "get_format", "resolve_format_name", "detect_format"]

#: Our own keys: the canonical side of every rename table.
CANONICAL = "layerscale"

# name -> table. Adding a format: one file with its KeyFormat and one line here.
FORMATS: dict[str, KeyFormat] = {f.name: f for f in (TIMM_VIT, TIMM_CAIT, DEIT3_OFFICIAL, HF_DINOV2)}

#: Other names users reach for; each is the same key layout as its target.
ALIASES = {"timm_deit3": "timm_vit", "official_cait": "timm_cait", "dinov2": "hf_dinov2"}

_GAMMA_N = re.compile(r"(^|\.)gamma_[12]$")


def list_formats() -> list[str]:
    """Names accepted as ``source`` / ``target`` (besides ``"auto"`` for a source)."""
    return sorted([CANONICAL, *FORMATS, *ALIASES])


def resolve_format_name(name: str) -> str:
    """The canonical spelling of format ``name``; unknown names raise ``ValueError`` listing the known ones."""
    if not isinstance(name, str):
        raise ValueError(f"checkpoint format must be a string, got {name!r}")
    name = ALIASES.get(name, name)
    if name != CANONICAL and name not in FORMATS:
        raise ValueError(f"unknown checkpoint format {name!r}; known formats: {', '.join(list_formats())}")
    return name


def get_format(name: str) -> KeyFormat | None:
    """The rename table of format ``name`` (``None`` for our own, canonical format)."""
    name = resolve_format_name(name)
    return None if name == CANONICAL else FORMATS[name]


def detect_format(state_dict: Mapping[str, object]) -> str:
    """Recognise a (container-free) state dict's format from its key names.

    Hugging Face DINOv2: ``embeddings.patch_embeddings.*`` / ``encoder.layer.*`` (optionally under ``dinov2.``);
    bare ``gamma_1``/``gamma_2`` parameters: timm / official CaiT when class-attention blocks
    (``blocks_token_only``) are present, else the official DeiT III code; any other ``blocks.*`` layout: ours
    (which is also timm's ViT / DeiT III layout). Anything else raises ``ValueError`` showing some keys.
    """
    keys = [k.removeprefix("dinov2.") for k in state_dict]
    if any(k.startswith(("embeddings.patch_embeddings.", "encoder.layer.")) for k in keys):
        return HF_DINOV2.name
    has_gamma_n = any(_GAMMA_N.search(k) for k in keys)
    if any(k.startswith("blocks_token_only.") for k in keys):
        return TIMM_CAIT.name if has_gamma_n else CANONICAL
    if has_gamma_n:
        return DEIT3_OFFICIAL.name
    if any(k.startswith("blocks.") for k in keys):
        return CANONICAL
    raise ValueError(f"cannot recognise the checkpoint format from its keys {format_keys(keys, 6)}; "
                     f"name it explicitly, one of: {', '.join(list_formats())}")
