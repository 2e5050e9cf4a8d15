"""What the evidence scripts' tests compare configs with: a nested config as ``{"section.key": value}``."""

from __future__ import annotations


def flat_keys(tree: dict, prefix: str = "") -> dict:
    """``tree`` (nested dicts) as one level of dotted keys: ``{"optim": {"lr": 1e-3}}`` → ``{"optim.lr": 1e-3}``."""
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(flat_keys(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out
