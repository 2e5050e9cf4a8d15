"""The normalisation a Hugging Face image model's inputs get, read from its image processor's
``preprocessor_config.json`` (what ``save_pretrained`` of a ``ViTImageProcessor`` / ``BitImageProcessor`` / ...
writes beside the model).

transformers' image processors turn 8-bit pixels ``x ∈ [0, 255]`` into ``(x · r − μ) / σ``: ``r`` the
``rescale_factor`` when ``do_rescale`` (transformers' default ``1/255``), else 1; ``μ``, ``σ`` the per-channel
``image_mean`` / ``image_std`` when ``do_normalize``, else 0 and 1 (``BaseImageProcessor.rescale`` and
``normalize``, transformers ``image_processing_utils.py``). On the ``[0, 1]`` pixel scale of this library's datasets,
``p = x / 255``, that is ``(p − μ / (255 r)) / (σ / (255 r))``: :func:`processor_normalization` returns those mean
and std. The file is read as hostile input (bounded, not through a link, strict JSON) and every field is checked
before use; a missing file is ``None`` (the caller says which statistics it used instead).
"""

from __future__ import annotations

import math
from pathlib import Path

from ..messages import shown_value
from ..untrusted_files import MAX_CONFIG_BYTES, parse_json, read_regular_file

__all__ = ["PROCESSOR_FILE", "processor_normalization"]

#: The file an image processor's ``save_pretrained`` writes.
PROCESSOR_FILE = "preprocessor_config.json"


def _flag(config: dict, key: str, path: Path) -> bool:
    value = config.get(key, True)  # transformers' image processors rescale and normalise unless told not to
    if not isinstance(value, bool):
        raise ValueError(f"{path}: {key} is {shown_value(value)}; expected true or false")
    return value


def _positive_number(value: object, key: str, path: Path) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{path}: {key} is {shown_value(value)}; expected a finite number > 0")
    return float(value)


def _per_channel(config: dict, key: str, channels: int, path: Path, positive: bool) -> tuple[float, ...]:
    """``config[key]``: one finite number per channel, or one number for every channel."""
    value = config.get(key)
    if value is None:
        raise ValueError(f"{path}: no {key}, and do_normalize is not false; expected one value per channel "
                         f"({channels}), as an image processor's save_pretrained writes it")
    values = list(value) if isinstance(value, list) else [value]
    if len(values) == 1:
        values *= channels
    valid = all(not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)
                and (v > 0 or not positive) for v in values)
    if not valid or len(values) != channels:
        need = "finite numbers > 0" if positive else "finite numbers"
        raise ValueError(f"{path}: {key} is {shown_value(value)}; expected {channels} {need} (one per input "
                         "channel of the model)")
    return tuple(float(v) for v in values)


def processor_normalization(folder: Path, channels: int) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    """``(mean, std)`` on the ``[0, 1]`` pixel scale that reproduce the image processor saved in ``folder``
    (module docstring) for a model of ``channels`` input channels; ``None`` when the folder has no
    ``preprocessor_config.json``. A one-line ``ValueError`` for a field that is not what an image processor
    writes."""
    path = folder / PROCESSOR_FILE
    if not path.exists() and not path.is_symlink():
        return None
    config = parse_json(read_regular_file(path, MAX_CONFIG_BYTES), str(path))  # a JSON object, or refused
    factor = _positive_number(config.get("rescale_factor", 1 / 255), "rescale_factor", path) \
        if _flag(config, "do_rescale", path) else 1.0
    if _flag(config, "do_normalize", path):
        mean = _per_channel(config, "image_mean", channels, path, positive=False)
        std = _per_channel(config, "image_std", channels, path, positive=True)
    else:
        mean, std = (0.0,) * channels, (1.0,) * channels
    scale = 255.0 * factor
    return tuple(m / scale for m in mean), tuple(s / scale for s in std)
