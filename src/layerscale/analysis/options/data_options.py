"""The command-line options of the data a source is scored and judged on, shared by ``layerscale analyze`` and
``layerscale prune`` (:mod:`~layerscale.analysis.eval_data.source_data`)."""

from __future__ import annotations

import argparse

from ..eval_data.source_data import DataRequest, TextOptions

__all__ = ["DATA_OPTION_MINIMA", "add_text_arguments", "check_data_options", "data_request"]

#: ``(option, attribute, least value)`` of the data options both commands take: an image of at least one pixel a
#: side, windows of at least two tokens (one predicted from the one before it: the least ``--seq-len``
#: :func:`~layerscale.analysis.eval_data.source_data.source_data` accepts) and at least one window per split.
DATA_OPTION_MINIMA = (("--img-size", "img_size", 1), ("--seq-len", "seq_len", 2), ("--samples", "samples", 1))


def add_text_arguments(parser: argparse.ArgumentParser) -> None:
    """``--tokenizer``, ``--seq-len``, ``--samples``, ``--text-field`` (language models read from a folder)."""
    parser.add_argument("--tokenizer", default=None, metavar="FOLDER",
                        help="Hugging Face tokenizer folder for the text (default: the model folder's own tokenizer; "
                             "bytes for the library's byte-level models)")
    parser.add_argument("--seq-len", type=int, default=128, metavar="T",
                        help="tokens per window (at most the model's positions; default 128)")
    parser.add_argument("--samples", type=int, default=64, metavar="W",
                        help="windows per split: calibration (first half of the text) and evaluation (second half); "
                             "default 64")
    parser.add_argument("--text-field", default=None, metavar="FIELD",
                        help="read --data-path as JSON Lines and take this field of each line (default for a .jsonl "
                             "file: text)")


def check_data_options(args: argparse.Namespace) -> None:
    """A one-line ``ValueError`` naming the option, its value and the least value allowed (``--img-size must be >=
    1, got -1``) for an option of :data:`DATA_OPTION_MINIMA` below it; called before any file is read or written
    (options absent from a namespace, or ``None``, are not checked)."""
    for option, name, least in DATA_OPTION_MINIMA:
        value = getattr(args, name, None)
        if value is not None and value < least:
            raise ValueError(f"{option} must be >= {least}, got {value}")


def data_request(args: argparse.Namespace, examples: int | None) -> DataRequest:
    """The :class:`DataRequest` of parsed ``args`` (options absent from a namespace count as not given)."""
    text = TextOptions(tokenizer=getattr(args, "tokenizer", None), seq_len=getattr(args, "seq_len", 128),
                       samples=getattr(args, "samples", 64), text_field=getattr(args, "text_field", None))
    return DataRequest(data=getattr(args, "data", None), data_path=getattr(args, "data_path", None),
                       img_size=getattr(args, "img_size", None), text=text, examples=examples)
