"""The result of a depth analysis: every number, with JSON (``analysis.json``) and CSV (``analysis.csv``) forms.

JSON has no NaN or infinity: non-finite floats are written as the strings ``"nan"``, ``"inf"``, ``"-inf"`` (as the
trainer's metric log does) and read back as floats. The CSV has one row per block (1-based ``block``); every
per-block number with a bootstrap interval has ``NAME_low`` and ``NAME_high`` columns beside it.
"""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..atomic_io import write_text_atomic
from ..diagnostics.records import json_safe, restore_numbers
from .summary import DepthSummary

__all__ = ["DepthAnalysis", "RESULT_FORMAT", "effective_depth", "effective_depth_interval"]

RESULT_FORMAT = "layerscale.depth_analysis"
RESULT_VERSION = 2


@dataclass
class DepthAnalysis:
    """Per-block measures of one model on one evaluation set (block ``l`` is ``index l − 1`` of each list).

    ``ablation_loss[l]`` / ``ablation_accuracy[l]``: the model with block ``l`` replaced by the identity;
    ``early_exit_loss[k]`` / ``early_exit_accuracy[k]`` (``k = 0 … L``): only the first ``k`` blocks kept, then the
    final norm and head (for a language model: the logit lens); ``angular_distance[l]``: Gromov et al.'s angular
    distance between the stream entering and leaving block ``l`` on the token the head reads (``readout``: ``last``,
    ``cls``, ``mean[P:]``, ``cls+mean[1:]``, ... — :mod:`~layerscale.analysis.pruning.readout`);
    ``angular_distance_all_tokens[l]``: the same averaged over every token;
    ``block_influence[l]``: ShortGPT's ``1 − mean cos``; ``relative_update[l]``; ``removal_spans[n − 1]`` (1-based
    first and last block), ``removal_distance[n − 1]``, ``removal_delta_loss[n − 1]`` and
    ``removal_delta_accuracy[n − 1]``: the span of ``n`` blocks removed for the n-block curve and what its removal
    costs; ``probe_accuracy[point][l]`` held-out linear-probe accuracy (mean over the probe splits) at an observation
    point (``block_out/cls``, ``block_out/mean``, ``attn_out/...``, ``mlp_out/...``, ``norm2_in/...``) and
    ``probe_embedding[pooling]`` at the embedding ``x^(0)``; ``probe_selectivity[point]``: task minus control-task
    accuracy (Hewitt & Liang 2019) for the block outputs and the embedding (``embedding/POOLING``, one value);
    ``cka[l][m]`` (``cka_kind``: linear or debiased)
    between block outputs ``l`` and ``m``. ``head_distance[i][j]``: the mean angular distance between depths ``i``
    and ``j`` (0 … L) of the token the head reads — Gromov et al.'s ``d(x^(i), x^(i+n))`` at ``j = i + n``.
    ``criteria``: the criterion comparison
    (:class:`~layerscale.analysis.pruning.criterion_comparison.CriterionComparison` as a dict) when asked for.
    ``intervals[name]``: the bootstrap percentile interval ``[low, high]`` of each entry of ``name`` (a field above,
    ``probe/POINT``, ``probe_embedding/POOLING`` or ``summary/...``).
    """

    model: str
    residual: str | None
    task: str
    num_examples: int
    block_names: list[str]
    readout: str
    clean_loss: float
    clean_accuracy: float
    ablation_loss: list[float]
    ablation_accuracy: list[float]
    early_exit_loss: list[float]
    early_exit_accuracy: list[float]
    angular_distance: list[float]
    angular_distance_all_tokens: list[float]
    block_influence: list[float]
    relative_update: list[float]
    removal_spans: list[list[int]]
    removal_distance: list[float]
    removal_delta_loss: list[float]
    removal_delta_accuracy: list[float]
    probe_accuracy: dict[str, list[float]]
    probe_embedding: dict[str, float]
    probe_selectivity: dict[str, list[float]]
    cka: list[list[float]]
    cka_representation: str
    cka_kind: str
    intervals: dict[str, Any]
    summary: DepthSummary
    settings: dict[str, Any] = field(default_factory=dict)
    source: str | None = None
    head_distance: list[list[float]] = field(default_factory=list)
    criteria: dict[str, Any] | None = None

    @property
    def depth(self) -> int:
        return len(self.block_names)

    @property
    def ablation_delta_loss(self) -> list[float]:
        return [loss - self.clean_loss for loss in self.ablation_loss]

    @property
    def ablation_delta_accuracy(self) -> list[float]:
        return [acc - self.clean_accuracy for acc in self.ablation_accuracy]

    def to_dict(self) -> dict[str, Any]:
        raw = asdict(self)
        raw["summary"] = self.summary.to_dict()
        return {"format": RESULT_FORMAT, "version": RESULT_VERSION, **json_safe(raw)}

    @classmethod
    def from_dict(cls, raw: Any) -> DepthAnalysis:
        """Read what :meth:`to_dict` wrote; a one-line ``ValueError`` for anything else."""
        if not isinstance(raw, dict) or raw.get("format") != RESULT_FORMAT:
            raise ValueError(f"not a depth analysis (no format {RESULT_FORMAT!r})")
        if raw.get("version") != RESULT_VERSION:
            raise ValueError(f"depth-analysis version {raw.get('version')!r}; this version reads {RESULT_VERSION} "
                             "(rerun the analysis)")
        body = restore_numbers({k: v for k, v in raw.items() if k not in ("format", "version")})
        try:
            body["summary"] = DepthSummary.from_dict(body["summary"])
            return cls(**body)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"depth analysis with missing or unknown fields ({exc})") from None

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1) + "\n"

    @classmethod
    def read_json(cls, path: str | os.PathLike) -> DepthAnalysis:
        with open(path, encoding="utf-8") as fh:
            try:
                raw = json.load(fh)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}: not valid JSON ({exc})") from None
        return cls.from_dict(raw)

    def interval(self, name: str, index: int | None = None) -> list[float] | None:
        """The bootstrap interval ``[low, high]`` of ``name`` (entry ``index`` of a per-block list), or ``None``."""
        value = self.intervals.get(name)
        if value is None:
            return None
        return value[index] if index is not None else value

    def csv_rows(self) -> list[dict[str, Any]]:
        """One dict per block: the CSV's rows."""
        rows = []
        for i, name in enumerate(self.block_names):
            values = {
                "ablation_delta_loss": (self.ablation_loss[i] - self.clean_loss, "ablation_delta_loss", i),
                "ablation_delta_accuracy": (self.ablation_accuracy[i] - self.clean_accuracy,
                                            "ablation_delta_accuracy", i),
                "early_exit_loss": (self.early_exit_loss[i + 1], "early_exit_loss", i + 1),
                "early_exit_accuracy": (self.early_exit_accuracy[i + 1], "early_exit_accuracy", i + 1),
                "angular_distance": (self.angular_distance[i], "angular_distance", i),
                "angular_distance_all_tokens": (self.angular_distance_all_tokens[i], "angular_distance_all_tokens",
                                                i),
                "block_influence": (self.block_influence[i], "block_influence", i),
                "relative_update": (self.relative_update[i], "relative_update", i),
                "removal_delta_loss": (self.removal_delta_loss[i], "removal_delta_loss", i),
                "removal_delta_accuracy": (self.removal_delta_accuracy[i], "removal_delta_accuracy", i),
            }
            values.update({f"probe_{point.replace('/', '_')}": (curve[i], f"probe/{point}", i)
                           for point, curve in self.probe_accuracy.items()})
            values.update({f"selectivity_{point.replace('/', '_')}": (curve[i], f"probe_selectivity/{point}", i)
                           for point, curve in self.probe_selectivity.items() if not point.startswith("embedding/")})
            row: dict[str, Any] = {"block": i + 1, "name": name}
            for column, (value, key, index) in values.items():
                row[column] = value
                bounds = self.interval(key, index)
                row[f"{column}_low"], row[f"{column}_high"] = bounds if bounds is not None else (None, None)
            first, last = self.removal_spans[i]
            row.update({"removal_blocks": i + 1, "removal_span": f"{first}-{last}",
                        "ablation_loss": self.ablation_loss[i], "ablation_accuracy": self.ablation_accuracy[i],
                        "needed_alone": (i + 1) in self.summary.needed_alone_blocks,
                        "near_identity": (i + 1) in self.summary.near_identity_blocks})
            rows.append(row)
        return rows

    def to_csv(self) -> str:
        rows = self.csv_rows()
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})
        return buffer.getvalue()

    def write(self, out_dir: str | os.PathLike, html: str | None = None) -> dict[str, Path]:
        """Write ``analysis.json``, ``analysis.csv`` and, given ``html`` (the page
        :func:`layerscale.analysis.outputs.report.analysis_page` renders), ``analysis.html`` into ``out_dir``, each
        atomically; returns their paths by kind."""
        out = Path(out_dir)
        paths = {"json": out / "analysis.json", "csv": out / "analysis.csv"}
        texts = {"json": self.to_json(), "csv": self.to_csv()}
        if html is not None:
            paths["html"] = out / "analysis.html"
            texts["html"] = html
        out.mkdir(parents=True, exist_ok=True)
        for kind, path in paths.items():
            write_text_atomic(path, texts[kind])
        return paths


def effective_depth(result: DepthAnalysis) -> int:
    """``D_δ``: the fewest blocks a contiguous removal keeps within the analysis's tolerance δ of the full model's
    loss (see :mod:`layerscale.analysis.summary`)."""
    return result.summary.effective_depth


def effective_depth_interval(result: DepthAnalysis) -> tuple[int, float, float]:
    """``(D_δ, low, high)``: the effective depth and its bootstrap percentile interval at ``summary.level``, for a
    figure's error bars (e.g. a study's depth-use figure)."""
    low, high = result.summary.effective_depth_interval
    return result.summary.effective_depth, low, high
