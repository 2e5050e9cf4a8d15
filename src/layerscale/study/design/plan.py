"""A study's plan — steps per run, the metric, the data, every cell's parameter count — checked before any run and
recorded in the study folder (``plan.json``), so that the tables and report rebuild without the data.

Training (``run_study`` with ``train=True``) always computes the plan from the data and the code: every run's config
validated, the data loaded once, every (method, depth) model built on the meta device. It then compares it with the
recorded plan: a different step count or parameter count means the runs already in the folder were trained under
another plan (the data or the model code changed), and the study is refused rather than mixed; a changed data
description alone is rewritten. ``--report-only`` reads the recorded plan and loads no data (the run folders hold
everything else), so a study folder rebuilds on a machine without its dataset.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ...atomic_io import write_json_atomic
from ...untrusted_files import read_json_file
from .grid import StudySpec
from .metric import Metric

__all__ = ["PLAN_FILE", "StudyPlan", "plan_study", "read_plan", "resolve_plan", "write_plan"]

#: The recorded plan, beside ``study.json``.
PLAN_FILE = "plan.json"


@dataclass(frozen=True)
class StudyPlan:
    """What the checks found: steps per run at the full budget and how runs are scored."""

    total_steps: int
    metric: Metric
    data_description: str
    #: parameters of every (method, depth) cell's model, counted on the meta device
    params: dict[tuple[str, int], int] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"total_steps": self.total_steps, "language_model": not self.metric.classification,
                "data_description": self.data_description,
                "params": [[method, depth, count] for (method, depth), count in sorted(self.params.items())]}

    @classmethod
    def from_dict(cls, raw: dict) -> StudyPlan:
        total = raw["total_steps"]
        if isinstance(total, bool) or not isinstance(total, int) or not 1 <= total <= 10 ** 9:
            raise ValueError(f"total_steps {str(total)[:40]!r}; expected a whole number from 1 to 10**9")
        return cls(total, Metric.for_language_model(bool(raw["language_model"])),
                   str(raw["data_description"]),
                   {(str(method), int(depth)): int(count) for method, depth, count in raw["params"]})


def _checked_configs(spec: StudySpec, study_dir: Path) -> dict:
    """Every cell's tuning and final config, validated (no data read): ``{(method, depth, kind): TrainConfig}``."""
    from ...train.config.schema import TrainConfig

    spec.check_compatible(study_dir)
    configs = {}
    for method, depth in spec.cells():
        for kind in ("tune", "final"):
            run = spec.run(study_dir, method, depth, spec.lrs[0] if spec.lrs else spec.shared_lr,
                           spec.tune_seed if kind == "tune" else spec.seeds[0], kind)
            try:
                configs[(method, depth, kind)] = TrainConfig.from_dict(run.config)
            except ValueError as exc:
                raise ValueError(f"run {run.run_id}: {exc}") from None
    return configs


def plan_study(spec: StudySpec, study_dir: Path) -> StudyPlan:
    """Validate every run of the study without writing anything; raises ``ValueError`` naming the first problem."""
    import torch

    from ...models.registry import create_model
    from ...train.loop.budget import planned_total_steps, steps_per_epoch
    from ...train.setup.data_setup import is_language_model, load_train_data

    configs = _checked_configs(spec, study_dir)
    first = next(iter(configs.values()))
    if first.data.batch_size < 1:
        raise ValueError(f"data.batch_size must be >= 1, got {first.data.batch_size}")
    data = load_train_data(first)
    params = {}
    for (method, depth, kind), cfg in configs.items():
        if kind != "final":
            continue
        try:
            with torch.device("meta"):
                model = create_model(cfg.model.name, **{**data.model_args, **cfg.model.options})
            params[(method, depth)] = sum(p.numel() for p in model.parameters())
        except (ValueError, TypeError) as exc:
            raise ValueError(f"model {cfg.model.name!r} with residual {method!r} at depth {depth} cannot be built "
                             f"for {data.description.split(':')[0]}: {str(exc).splitlines()[0]}") from None
    epoch_steps = steps_per_epoch(len(data.train), first.data.batch_size)  # the trainer's rule, one process
    if epoch_steps == 0:
        raise ValueError(f"data.batch_size {first.data.batch_size} is larger than the training split "
                         f"({len(data.train)} samples)")
    total = planned_total_steps(first.optim, epoch_steps)
    return StudyPlan(total, Metric.for_language_model(is_language_model(first.model.name)), data.description, params)


def read_plan(study_dir: Path) -> StudyPlan | None:
    """The plan recorded in ``study_dir`` (``None`` when it records none; ``ValueError`` naming an unreadable one)."""
    path = Path(study_dir) / PLAN_FILE
    try:
        return StudyPlan.from_dict(read_json_file(path))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path} is not a readable study plan ({str(exc).splitlines()[0]}); delete it and run the "
                         "study again (the data will be read to rebuild it)") from None


def _conflict(recorded: StudyPlan, plan: StudyPlan) -> str | None:
    if recorded.total_steps != plan.total_steps:
        return f"{recorded.total_steps} steps per run recorded, {plan.total_steps} now"
    if recorded.metric != plan.metric:
        return f"metric {recorded.metric.name!r} recorded, {plan.metric.name!r} now"
    for cell in sorted(set(recorded.params) & set(plan.params)):
        if recorded.params[cell] != plan.params[cell]:
            method, depth = cell
            return (f"{method} at depth {depth}: {recorded.params[cell]:,} parameters recorded, "
                    f"{plan.params[cell]:,} now")
    return None


def resolve_plan(spec: StudySpec, study_dir: Path, *, train: bool) -> StudyPlan:
    """The plan of the study in ``study_dir``: with ``train``, computed (:func:`plan_study`) and refused when it
    contradicts the recorded one; without, the recorded one when there is one (configs still validated, no data
    read), else computed. Writes nothing (see :func:`write_plan`)."""
    recorded = read_plan(study_dir)
    if not train and recorded is not None:
        _checked_configs(spec, study_dir)
        return recorded
    plan = plan_study(spec, study_dir)
    if recorded is not None:
        conflict = _conflict(recorded, plan)
        if conflict:
            raise ValueError(f"{Path(study_dir) / PLAN_FILE}: the study's runs were planned differently ({conflict}): "
                             f"the data or the model code changed since; continue it where it started, or start a "
                             f"new study folder")
    return plan


def write_plan(study_dir: Path, plan: StudyPlan) -> None:
    """Record ``plan`` in ``study_dir`` (atomically; left untouched when it already records exactly this)."""
    path = Path(study_dir) / PLAN_FILE
    if read_plan(study_dir) == plan:
        return
    write_json_atomic(path, plan.to_dict())
