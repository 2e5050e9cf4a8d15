"""``analyze_run``: the depth analysis of any model source (:func:`layerscale.sources.read_source`: a training run,
a weights file with its training config, our / timm / Hugging Face model folder, or a folder ``prune`` / ``grow``
wrote) on its evaluation data (:mod:`~layerscale.analysis.eval_data.source_data`).

``RunModel``, ``load_run_model`` and ``load_eval_data`` (a training run as a source) live in
:mod:`layerscale.sources.run_model` and are re-exported here, where they were first defined.
"""

from __future__ import annotations

import os
from typing import Any

from ..sources.run_model import RunModel, load_eval_data, load_run_model

__all__ = ["RunModel", "load_run_model", "load_eval_data", "analyze_run"]


def analyze_run(source: str | os.PathLike, data: str | None = None, data_path: str | os.PathLike | None = None,
                config: str | os.PathLike | None = None, *, text: Any = None, img_size: int | None = None,
                **options: Any):
    """:func:`~layerscale.analysis.analyze_depth` of the model in ``source`` on its evaluation data: a training
    run's held-out split (or ``data`` / ``data_path``); for a model folder, the image dataset ``data`` (folder
    ``data_path``, at ``img_size``) or, for a language model, the evaluation split of the text ``data_path``
    through the model's tokenizer (``text``: a :class:`~layerscale.analysis.eval_data.source_data.TextOptions`).
    ``options`` go to ``analyze_depth``. Returns the :class:`~layerscale.analysis.DepthAnalysis`, its
    ``settings["data"]`` saying which data it was judged on."""
    from ..sources import read_source
    from .analyze import analyze_depth
    from .eval_data.source_data import DataRequest, source_data

    found = read_source(source, config)
    split = source_data(found, DataRequest(data=data, data_path=data_path, img_size=img_size, text=text,
                                           examples=options.get("max_examples")))
    options.setdefault("source", str(source))
    if options.get("device") is not None:
        found.model.to(options["device"])
    result = analyze_depth(found.model, split.evaluation, **options)
    result.settings["data"] = list(split.lines)  # which split, how many examples / windows, which tokenizer
    return result
