"""``layerscale train --print-config``: the full resolved config of a run, printed instead of training it.

Resolved means what the run would write to ``RUN_DIR/config.yaml``: the file (or, with ``--resume``, the run's own
``config.yaml``), then every ``--set`` override, validated, with every key the file leaves out at its default.
Nothing is loaded, built or written.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

from .config import TrainConfig
from .config_file import apply_overrides, dump_config

__all__ = ["resolved_config_text"]


def resolved_config_text(config: str | os.PathLike | None, overrides: Sequence[str] = (),
                         out: str | os.PathLike | None = None, resume: str | os.PathLike | None = None) -> str:
    """The YAML (JSON without pyyaml) of the validated config; raises what :func:`layerscale.train.run` raises
    for the same bad input, before anything is written."""
    from .runner import _raw_config, _resolve_resume

    resume_dir = _resolve_resume(resume)[0] if resume is not None else None
    cfg = TrainConfig.from_dict(apply_overrides(_raw_config(config, resume_dir), list(overrides)))
    out_dir = resume_dir if resume_dir is not None else out
    if out_dir is not None:
        cfg = dataclasses.replace(cfg, run=dataclasses.replace(cfg.run, out_dir=str(out_dir)))
    return dump_config(cfg.to_dict())
