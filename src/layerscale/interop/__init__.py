"""Checkpoint interop: explicit rename tables between our keys and timm, the official CaiT / DeiT III code and
Hugging Face DINOv2, with format recognition, loading into a model and export. Usage::

    sd = convert_state_dict(timm_cait.state_dict(), source="timm_cait")   # -> our CaiT's keys
    load_pretrained_into(our_cait, "XXS24_224.pth")                       # official file, format detected
    export_state_dict(our_vit, "hf_dinov2")                               # -> transformers Dinov2Model keys
"""

from .convert import (
    check_fits, convert_state_dict, convert_with_report, export_state_dict, format_of_model, load_pretrained_into,
    normalize_checkpoint,
)
from .formats import CANONICAL, detect_format, list_formats, resolve_format_name
from .rules import ConversionReport, Dropped, KeyFormat, Rule

__all__ = [
    "CANONICAL", "ConversionReport", "Dropped", "KeyFormat", "Rule", "check_fits", "convert_state_dict",
    "convert_with_report", "detect_format", "export_state_dict", "format_of_model", "list_formats", "load_pretrained_into",
    "normalize_checkpoint", "resolve_format_name",
]
