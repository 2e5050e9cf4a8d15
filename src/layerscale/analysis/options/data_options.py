"""The command-line options of the data a source is scored and judged on, shared by ``layerscale analyze`` and
``layerscale prune`` (:mod:`~layerscale.analysis.eval_data.source_data`)."""

from __future__ import annotations

import argparse

from ..eval_data.source_data import DataRequest, TextOptions

__all__ = ["add_text_arguments", "data_request"]


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


def data_request(args: argparse.Namespace, examples: int | None) -> DataRequest:
    """The :class:`DataRequest` of parsed ``args`` (options absent from a namespace count as not given)."""
    text = TextOptions(tokenizer=getattr(args, "tokenizer", None), seq_len=getattr(args, "seq_len", 128),
                       samples=getattr(args, "samples", 64), text_field=getattr(args, "text_field", None))
    return DataRequest(data=getattr(args, "data", None), data_path=getattr(args, "data_path", None),
                       img_size=getattr(args, "img_size", None), text=text, examples=examples)
