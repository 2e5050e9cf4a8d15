"""The result of a depth analysis: every number, with JSON (``analysis.json``) and CSV (``analysis.csv``) forms.

JSON has no NaN or infinity: non-finite floats are written as the strings ``"nan"``, ``"inf"``, ``"-inf"`` (as the
trainer's metric log does) and read back as floats. The CSV has one row per block (1-based ``block``).
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

__all__ = ["DepthAnalysis", "RESULT_FORMAT", "effective_depth"]

RESULT_FORMAT = "layerscale.depth_analysis"
RESULT_VERSION = 1


@dataclass
class DepthAnalysis:
    """Per-block measures of one model on one evaluation set (block ``l`` is ``index l − 1`` of each list).

    ``ablation_loss[l]`` / ``ablation_accuracy[l]``: the model with block ``l`` replaced by the identity;
    ``early_exit_loss[k]`` / ``early_exit_accuracy[k]`` (``k = 0 … L``): only the first ``k`` blocks kept, then the
    final norm and head (for a language model: the logit lens); ``angular_distance[l]`` and ``relative_update[l]``
    between the stream entering and leaving block ``l``; ``probe_accuracy[point][l]`` held-out linear-probe accuracy
    at an observation point (``block_out/cls``, ``block_out/mean``, ``attn_out/...``, ``mlp_out/...``,
    ``norm2_in/...``); ``cka[l][m]`` linear CKA between block outputs ``l`` and ``m``.
    """

    model: str
    residual: str | None
    task: str
    num_examples: int
    block_names: list[str]
    clean_loss: float
    clean_accuracy: float
    ablation_loss: list[float]
    ablation_accuracy: list[float]
    early_exit_loss: list[float]
    early_exit_accuracy: list[float]
    angular_distance: list[float]
    relative_update: list[float]
    probe_accuracy: dict[str, list[float]]
    cka: list[list[float]]
    cka_representation: str
    summary: DepthSummary
    settings: dict[str, Any] = field(default_factory=dict)
    source: str | None = None

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
            raise ValueError(f"depth-analysis version {raw.get('version')!r}; this version reads {RESULT_VERSION}")
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

    def csv_rows(self) -> list[dict[str, Any]]:
        """One dict per block: the CSV's rows."""
        rows = []
        for i, name in enumerate(self.block_names):
            row = {"block": i + 1, "name": name,
                   "ablation_delta_loss": self.ablation_loss[i] - self.clean_loss,
                   "ablation_delta_accuracy": self.ablation_accuracy[i] - self.clean_accuracy,
                   "ablation_loss": self.ablation_loss[i], "ablation_accuracy": self.ablation_accuracy[i],
                   "early_exit_loss": self.early_exit_loss[i + 1],
                   "early_exit_accuracy": self.early_exit_accuracy[i + 1],
                   "angular_distance": self.angular_distance[i], "relative_update": self.relative_update[i],
                   "effective": (i + 1) in self.summary.effective_blocks,
                   "near_identity": (i + 1) in self.summary.near_identity_blocks}
            for point, curve in self.probe_accuracy.items():
                row[f"probe_{point.replace('/', '_')}"] = curve[i]
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
        :func:`layerscale.analysis.report.analysis_page` renders), ``analysis.html`` into ``out_dir``, each
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
    """The number of blocks whose ablation costs more than the analysis's loss threshold (see
    :mod:`layerscale.analysis.summary`)."""
    return result.summary.effective_depth
