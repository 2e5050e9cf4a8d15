"""Training: ``run(config)`` / ``layerscale train`` (config, trainer, schedules, checkpoints, distributed), and the
optimizer parameter groups. ``run(model=..., train_data=..., eval_data=..., loss_fn=...)`` trains the user's own
``nn.Module`` on the user's own data the same way (contract: :mod:`layerscale.train.user_model`).

Extension point for monitors (per-layer statistics, custom logging): subclass :class:`Callback` and pass
``run(config, callbacks=[...])``; each hook gets the :class:`Trainer`, whose ``log(record)`` writes a line of
``metrics.jsonl`` (and TensorBoard) on rank 0. The contract is documented in :mod:`layerscale.train.callbacks`.
"""

from .callbacks import Callback
from .config.schema import DataConfig, ModelConfig, OptimConfig, RunConfig, TrainConfig
from .nonfinite import NonFiniteError
from .loop.param_groups import is_scale_parameter, param_groups
from .loop.schedule import WarmupCosineSchedule, warmup_cosine_lr
from .loop.trainer import Trainer
from .runner import TrainResult, run
from .state.trainer_checkpoint import TrainState

__all__ = [
    "Callback", "DataConfig", "ModelConfig", "NonFiniteError", "OptimConfig", "RunConfig", "TrainConfig",
    "TrainResult", "TrainState", "Trainer", "WarmupCosineSchedule", "is_scale_parameter", "param_groups", "run",
    "warmup_cosine_lr",
]
