"""Diagnostics: watch LayerScale and the per-layer signal during training, and report it with plots.

:class:`LayerScaleMonitor` records, every ``k`` steps and for every block and branch of any transformer (ours, timm,
Hugging Face), the scales ``|γ|``, the branch-to-stream ratio ``‖γ ⊙ F(x)‖ / ‖x‖``, the stream RMS, gradient norms
and update-to-weight ratios; :class:`DiagnosticsCallback` runs it inside ``layerscale train``; :func:`write_report`
turns run directories into one HTML report with figures (:mod:`layerscale.diagnostics.plots` draws them). The
formulas and the record schema are in ``docs/diagnostics.md``.
"""

from .alerts import AlertThresholds
from .callback import DiagnosticsCallback
from .discovery import BlockProbe, BranchProbe, find_blocks
from .monitor import LayerScaleMonitor
from .report import Report, ReportSection, write_report
from .run_data import RunData, read_run

__all__ = [
    "AlertThresholds", "BlockProbe", "BranchProbe", "DiagnosticsCallback", "LayerScaleMonitor", "Report",
    "ReportSection", "RunData", "find_blocks", "read_run", "write_report",
]
