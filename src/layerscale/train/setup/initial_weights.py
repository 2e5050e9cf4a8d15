"""``run.init_from``: start training from saved weights (a grown or pruned model, another run) instead of a random
initialisation, and ``optim.trainable: new_blocks``: train only the blocks ``layerscale grow`` inserted."""

from __future__ import annotations

import os
from pathlib import Path

from torch import nn

__all__ = ["load_initial_weights", "freeze_for_config"]


def load_initial_weights(model: nn.Module, source: str | os.PathLike) -> tuple[int, ...] | None:
    """Load the weights at ``source`` (a model folder, a run or checkpoint directory, or a weights file) into
    ``model``, which must have exactly their keys and shapes; record on it the new blocks that a model folder
    written by ``layerscale grow`` lists, and return them (``None`` when there are none). A model folder of ours
    must also describe, in its ``config.json``, a model that computes the same function with these weights
    (head count, residual method, norm ε, pooling: :mod:`layerscale.interop.settings`), and so must the model a
    run's checkpoint records in its training state (a run or checkpoint directory), else ``ValueError`` naming each
    setting that differs. Weights that are not finite are refused."""
    from ...checkpoint_io import read_state_dict_file
    from ...sources.run_model import check_trained_model
    from ...surgery.growth.new_blocks import read_new_blocks, record_new_blocks
    from ...weight_checks import check_finite_tensors
    from ..state.checkpoint import STATE_FILE, check_same_architecture, load_checkpoint
    from ..state.run_paths import weights_file

    path = Path(source)
    if not path.exists():
        raise FileNotFoundError(f"config key run.init_from: {path}: no such model folder, run directory or file")
    if path.is_dir():
        _check_folder_settings(path, model)
    file = weights_file(path)
    if path.is_dir() and os.path.lexists(file.parent / STATE_FILE):  # a run's checkpoint: what model it trained
        tensors, state = load_checkpoint(file.parent)
        try:
            check_trained_model(file.parent, state, model)
        except ValueError as exc:
            raise ValueError(f"config key run.init_from: {exc}") from None
    else:
        tensors = read_state_dict_file(file).tensors
    check_same_architecture(file, tensors, model.state_dict())
    check_finite_tensors(tensors, str(file))
    model.load_state_dict(tensors)
    new = read_new_blocks(path) if path.is_dir() else None
    if new is not None:
        record_new_blocks(model, list(new))
    return new


def _check_folder_settings(folder: Path, model: nn.Module) -> None:
    """``ValueError`` when ``folder`` is a model folder of ours whose ``config.json`` builds a model computing
    another function than ``model`` with the same weights (keys and shapes cannot show it)."""
    import torch

    from ...interop.settings import compare_settings, model_settings
    from ...models.hub_mixin import _read_config
    from ...sources.model_folder import folder_kind, our_model_classes

    kind, _ = folder_kind(folder)
    if kind != "layerscale":
        return
    architecture, saved_args = _read_config(folder / "config.json")
    classes = our_model_classes()
    if architecture not in classes:
        return  # the weights' keys are checked below
    try:
        with torch.device("meta"):
            saved = classes[architecture](**saved_args)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"config key run.init_from: {folder / 'config.json'} does not build a {architecture}: "
                         f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    try:
        compare_settings(model_settings(saved), model_settings(model), "the folder", "configured model")
    except ValueError as exc:
        raise ValueError(f"config key run.init_from: {folder}: {exc}") from None


def freeze_for_config(model: nn.Module, trainable: str) -> None:
    """``trainable="new_blocks"``: every parameter outside the model's recorded new blocks gets
    ``requires_grad=False`` (so :func:`~layerscale.train.param_groups` leaves it out of the optimizer)."""
    if trainable == "new_blocks":
        from ...surgery.growth.new_blocks import freeze_all_but_new_blocks

        try:
            freeze_all_but_new_blocks(model)
        except ValueError as exc:
            raise ValueError(f"config key optim.trainable: new_blocks: {exc}") from None
