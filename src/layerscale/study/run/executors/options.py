"""Where a study's runs execute: the executor options, validated, and stored in ``study.json`` under ``"executor"``.

The options say *where* and *with what resources* each run trains, never *what* it trains: every engine starts the
same worker (:mod:`layerscale.study.run.worker`) on the same config, so the results do not depend on them, and
:meth:`StudySpec.check_compatible <layerscale.study.design.grid.StudySpec.check_compatible>` ignores them (a study started
on the local pool can be finished on Slurm). They are saved so that ``study.json`` alone says how the study ran;
a rerun without executor flags reuses the saved ones (:func:`resolve_options`).

- ``local``: the study's own process pool (``--jobs`` runs at once, ``--threads`` each).
- ``submitit``: one Slurm job per run, submitted as one job array per tuning rung and one for the final runs,
  through ``submitit`` (``slurm_partition``, ``slurm_time`` in minutes, ``gpus_per_run``, ``cpus_per_run``,
  ``nodes_per_run``: more than one node or GPU runs the worker under ``torchrun`` inside the job).
- ``ray``: one Ray task per run with ``num_cpus=cpus_per_run, num_gpus=gpus_per_run``, on the cluster at
  ``ray_address`` (``ray.init(address=...)``; ``None``: a Ray instance on this machine).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

__all__ = ["ENGINES", "ExecutorOptions", "parse_slurm_time", "resolve_options"]

ENGINES = ("local", "submitit", "ray")
SUBMITIT_CLUSTERS = ("slurm", "local", "debug")

_SLURM_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def parse_slurm_time(text: str | int, flag: str = "--slurm-time") -> int:
    """A Slurm time limit in whole minutes (rounded up). Accepts minutes (``90``) and Slurm's ``MM:SS``,
    ``HH:MM:SS``, ``D-HH``, ``D-HH:MM`` and ``D-HH:MM:SS`` (``sbatch --time``); ``flag`` names the option in the
    one-line ``ValueError``."""
    if isinstance(text, int) and not isinstance(text, bool):
        minutes = text
    else:
        match = _SLURM_TIME.match(str(text).strip())
        if not match:
            raise ValueError(f"{flag} {text!r} is not a Slurm time limit; expected minutes (90) or "
                             "HH:MM:SS, D-HH:MM:SS")
        days, first, second, third = match.groups()
        parts = [int(p) for p in (first, second, third) if p is not None]
        if days is not None:  # D-HH, D-HH:MM, D-HH:MM:SS
            hours, mins, secs = (parts + [0, 0])[:3]
            seconds = ((int(days) * 24 + hours) * 60 + mins) * 60 + secs
        elif len(parts) == 1:  # minutes
            seconds = parts[0] * 60
        elif len(parts) == 2:  # MM:SS
            seconds = parts[0] * 60 + parts[1]
        else:  # HH:MM:SS
            seconds = (parts[0] * 60 + parts[1]) * 60 + parts[2]
        minutes = -(-seconds // 60)
    if minutes < 1:
        raise ValueError(f"{flag} must be at least one minute, got {text!r}")
    return minutes


def _positive(name: str, value: Any, allow_zero: bool = False) -> None:
    low = 0 if allow_zero else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"--{name} must be an integer >= {low}, got {value!r}")


@dataclass(frozen=True)
class ExecutorOptions:
    """Engine and per-run resources; validated on construction (one ``ValueError`` naming the value).

    ``cpus_per_run``: CPU cores (and intra-op threads) per run on ``submitit`` and ``ray`` (``None``: the
    study's ``--threads``). ``gpus_per_run``: GPUs per node of a run (more than one: ``torchrun`` DDP inside the
    job or task). ``nodes_per_run``: Slurm nodes per run (``submitit`` only; more than one: multi-node DDP).
    ``slurm_time``: the job's time limit in minutes; at its end (or on preemption) Slurm signals the job, which
    requeues itself and resumes from the run's latest checkpoint. ``submitit_cluster``: ``None`` lets submitit
    choose (Slurm when ``sbatch`` is available, else processes on this machine); ``"local"``/``"debug"`` force
    submitit's local or in-process executors (tests).
    """

    engine: str = "local"
    slurm_partition: str | None = None
    slurm_time: int = 60
    gpus_per_run: int = 0
    cpus_per_run: int | None = None
    nodes_per_run: int = 1
    ray_address: str | None = None
    submitit_cluster: str | None = None

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ValueError(f"--executor {self.engine!r} is not one of: {', '.join(ENGINES)}")
        object.__setattr__(self, "slurm_time", parse_slurm_time(self.slurm_time))
        _positive("gpus-per-run", self.gpus_per_run, allow_zero=True)
        if self.cpus_per_run is not None:
            _positive("cpus-per-run", self.cpus_per_run)
        _positive("nodes-per-run", self.nodes_per_run)
        if self.nodes_per_run > 1 and self.engine != "submitit":
            raise ValueError(f"--nodes-per-run {self.nodes_per_run} needs --executor submitit (multi-node runs "
                             f"are Slurm jobs); got --executor {self.engine}")
        if self.nodes_per_run > 1 and self.gpus_per_run < 1:
            raise ValueError(f"--nodes-per-run {self.nodes_per_run} needs --gpus-per-run >= 1 (one DDP process "
                             "per GPU)")
        if self.gpus_per_run and self.engine == "local":
            raise ValueError(f"--gpus-per-run {self.gpus_per_run} needs --executor submitit or ray; the local pool "
                             "runs on this machine's devices as the config says (run.device)")
        if self.slurm_partition is not None and not str(self.slurm_partition).strip():
            raise ValueError("--slurm-partition is empty")
        if self.submitit_cluster not in (None, *SUBMITIT_CLUSTERS):
            raise ValueError(f"submitit_cluster {self.submitit_cluster!r} is not one of: "
                             f"{', '.join(SUBMITIT_CLUSTERS)} (or null: automatic)")

    @property
    def distributed(self) -> bool:
        """Whether a run is several processes (``torchrun`` inside the job or task)."""
        return self.nodes_per_run > 1 or self.gpus_per_run > 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> ExecutorOptions:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ValueError(f"unknown executor option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return cls(**raw)


def resolve_options(study_json: Path, given: dict[str, Any]) -> ExecutorOptions:
    """The options of a study: those saved in ``study_json`` (when it exists and has them), updated by ``given``
    (the flags set on this command line; ``None`` values are "not given"). Choosing another engine than the saved
    one starts from that engine's defaults."""
    base = ExecutorOptions()
    if study_json.is_file():
        try:
            from ....untrusted_files import read_json_file
            from ...design.spec_fields import check_spec_fields

            raw = read_json_file(study_json)
            check_spec_fields(raw, ("executor",))  # a mapping (or null), named with its value when not
            if raw.get("executor"):
                base = ExecutorOptions.from_dict(raw["executor"])
        except (OSError, ValueError, TypeError) as exc:
            raise ValueError(f"{study_json}: unreadable study file ({str(exc).splitlines()[0]})") from None
    if given.get("engine") not in (None, base.engine):  # another engine: its own defaults, not the saved ones
        base = ExecutorOptions()
    return replace(base, **{k: v for k, v in given.items() if v is not None})
