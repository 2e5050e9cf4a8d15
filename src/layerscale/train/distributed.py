"""Process groups, model wrapping (DDP or FSDP2) and the few collectives the trainer needs.

Under ``torchrun`` (``WORLD_SIZE > 1`` in the environment) the process group is initialised from the environment
(``env://``): NCCL when the run uses CUDA (one GPU per process, ``cuda:LOCAL_RANK``), gloo on CPU. Without
torchrun every helper here degrades to the single-process identity, so the trainer has one code path.
"""

from __future__ import annotations

import gc

import os
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

__all__ = [
    "DistContext",
    "all_gather_objects",
    "all_reduce",
    "barrier",
    "broadcast_object",
    "full_state_dicts",
    "load_full_state_dicts",
    "residual_blocks",
    "setup_distributed",
    "teardown_distributed",
    "unwrap_model",
    "wrap_model",
]


@dataclass(frozen=True)
class DistContext:
    """Where this process stands: ``rank`` of ``world_size``, its ``device``, and whether it owns the group."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    owns_group: bool = False

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, str(default))
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"environment variable {name}={value!r} is not an integer") from None


def setup_distributed(device: str) -> DistContext:
    """Pick the device (``"auto"``, ``"cpu"``, ``"cuda"``) and, under torchrun, join the process group."""
    cuda_ok = torch.cuda.is_available()
    if device == "cuda" and not cuda_ok:
        raise ValueError("config key run.device: 'cuda' was asked for, but torch.cuda.is_available() is False; "
                         "allowed here: auto, cpu")
    use_cuda = device == "cuda" or (device == "auto" and cuda_ok)
    world, rank, local_rank = _env_int("WORLD_SIZE", 1), _env_int("RANK", 0), _env_int("LOCAL_RANK", 0)
    if use_cuda:
        if local_rank >= torch.cuda.device_count():
            raise ValueError(f"LOCAL_RANK {local_rank} but only {torch.cuda.device_count()} CUDA device(s); "
                             "start at most one process per GPU")
        torch.cuda.set_device(local_rank)
    target = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    owns = False
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if use_cuda else "gloo", device_id=target if use_cuda else None)
        owns = True
    if world > 1:
        rank, world = dist.get_rank(), dist.get_world_size()
    return DistContext(rank, world, local_rank, target, owns)


def teardown_distributed(ctx: DistContext) -> None:
    """Destroy the process group this run created. The run's DDP reducer and model form reference cycles; they
    are collected first, while the group still exists — left to the interpreter's exit, their C++ destructors run
    during finalisation, where gloo can abort ("terminate called without an active exception")."""
    if ctx.owns_group and dist.is_initialized():
        gc.collect()
        dist.destroy_process_group()


def residual_blocks(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """``(name, module)`` of every transformer block (the units FSDP wraps and the non-finite search names)."""
    from ..layers.block import Block, ClassAttentionBlock

    return [(name, m) for name, m in model.named_modules() if isinstance(m, (Block, ClassAttentionBlock))]


def wrap_model(model: nn.Module, ctx: DistContext, strategy: str) -> nn.Module:
    """The model as trained: itself on one process; ``DistributedDataParallel`` or FSDP2 (``fully_shard`` of each
    block, then of the whole model, so each block's parameters are gathered only while it runs) under torchrun."""
    if not ctx.distributed:
        return model
    if strategy == "fsdp":
        try:
            from torch.distributed.fsdp import fully_shard
        except ImportError:
            raise ImportError(f"run.strategy: fsdp needs torch.distributed.fsdp.fully_shard (FSDP2, torch >= 2.6); "
                              f"this is torch {torch.__version__}; use run.strategy: ddp") from None
        from torch.distributed.device_mesh import init_device_mesh

        # the mesh on this run's device: left to FSDP, it takes CUDA whenever a GPU is visible (run.device: cpu too)
        mesh = init_device_mesh(ctx.device.type, (ctx.world_size,))
        for _, block in residual_blocks(model):
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
        return model
    from torch.nn.parallel import DistributedDataParallel

    device_ids = [ctx.device.index] if ctx.device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=device_ids)


def unwrap_model(model: nn.Module) -> nn.Module:
    """The user's module inside a DDP wrapper (FSDP2 shards in place, so its model is the module itself)."""
    from torch.nn.parallel import DistributedDataParallel

    return model.module if isinstance(model, DistributedDataParallel) else model


def all_reduce(tensor: torch.Tensor, ctx: DistContext, op: str = "sum") -> torch.Tensor:
    """In-place sum / max / min over ranks (identity on one process)."""
    if ctx.distributed:
        dist.all_reduce(tensor, op={"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX,
                                    "min": dist.ReduceOp.MIN}[op])
    return tensor


def broadcast_object(obj: Any, ctx: DistContext) -> Any:
    """Rank 0's ``obj`` on every rank (plain Python values of our own processes)."""
    if not ctx.distributed:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def all_gather_objects(obj: Any, ctx: DistContext) -> list[Any]:
    if not ctx.distributed:
        return [obj]
    out: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(out, obj)
    return out


def barrier(ctx: DistContext) -> None:
    if ctx.distributed:
        dist.barrier()


def full_state_dicts(model: nn.Module, optimizer: torch.optim.Optimizer,
                     ctx: DistContext, fsdp: bool) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Full (unsharded) model and optimizer state dicts on CPU, complete on rank 0 (a collective under FSDP,
    where other ranks may get empty dicts).

    The optimizer state is keyed by parameter name — the format of ``torch.distributed.checkpoint``'s full state
    dict, which FSDP uses — for plain and DDP models too, so a checkpoint written under one strategy or world
    size loads under any other. (Plain / DDP models convert directly: importing ``torch.distributed.checkpoint``
    costs seconds at start-up.)
    """
    if fsdp:
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            get_model_state_dict,
            get_optimizer_state_dict,
        )

        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        return (get_model_state_dict(model, options=options),
                get_optimizer_state_dict(model, optimizer, options=options))
    weights = {k: v.detach().cpu() for k, v in unwrap_model(model).state_dict().items()}
    return weights, _named_optimizer_state(optimizer)


def load_full_state_dicts(model: nn.Module, optimizer: torch.optim.Optimizer, weights: dict[str, torch.Tensor],
                          optim_state: dict[str, Any], fsdp: bool) -> None:
    """Inverse of :func:`full_state_dicts`; every rank passes the full dicts it read from the checkpoint."""
    if fsdp:
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            set_model_state_dict,
            set_optimizer_state_dict,
        )

        options = StateDictOptions(full_state_dict=True)
        set_model_state_dict(model, weights, options=options)
        set_optimizer_state_dict(model, optimizer, optim_state, options=options)
        return
    unwrap_model(model).load_state_dict(weights, strict=True)
    _load_named_optimizer_state(optimizer, optim_state)


def _named_optimizer_state(optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """``optimizer.state_dict()`` with every parameter index replaced by its name (groups carry
    ``param_names``, see :func:`layerscale.train.param_groups`)."""
    raw = optimizer.state_dict()
    names: dict[int, str] = {}
    groups = []
    for group in raw["param_groups"]:
        names.update(zip(group["params"], group["param_names"], strict=True))
        groups.append({**group, "params": list(group["param_names"])})
    state = {names[i]: {k: v.detach().cpu() if isinstance(v, torch.Tensor) else v for k, v in s.items()}
             for i, s in raw["state"].items()}
    return {"state": state, "param_groups": groups}


def _load_named_optimizer_state(optimizer: torch.optim.Optimizer, named: dict[str, Any]) -> None:
    index: dict[str, int] = {}
    for group in optimizer.state_dict()["param_groups"]:
        index.update(zip(group["param_names"], group["params"], strict=True))
    unknown = sorted(set(named["state"]) - set(index))
    if unknown:
        raise ValueError(f"optimizer state for parameters this model does not have: {unknown[:3]}")
    optimizer.load_state_dict({
        "state": {index[name]: s for name, s in named["state"].items()},
        "param_groups": [{**g, "params": [index[name] for name in g["params"]]} for g in named["param_groups"]],
    })
