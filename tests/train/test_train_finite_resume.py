"""A checkpoint is good only if its weights and one forward on a fixed batch are finite: resume refuses others
and names the last good one; a non-finite stop names the newest checkpoint that passes."""

import pytest
import torch
from train_helpers import snapshot, tiny_config

from layerscale.checkpoint_io import read_state_dict_file, save_safetensors_atomic
from layerscale.cli import main
from layerscale.train import run
from layerscale.train.state.checkpoint import MODEL_FILE, list_checkpoints
from layerscale.train.state.finite_check import last_good_checkpoint


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("finite") / "run"
    run(tiny_config(run={"checkpoint_every_steps": 4, "keep_checkpoints": 3}), out=run_dir)
    return run_dir


def _poison(checkpoint, key, value):
    """Rewrite ``checkpoint``'s weights with ``key`` filled with ``value``."""
    loaded = read_state_dict_file(checkpoint / MODEL_FILE)
    tensors = dict(loaded.tensors)
    tensors[key] = torch.full_like(tensors[key], value)
    save_safetensors_atomic(tensors, checkpoint / MODEL_FILE, metadata=loaded.metadata)


@pytest.fixture
def poisoned_copy(finished_run, tmp_path):
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(finished_run, copy)
    return copy


@pytest.mark.parametrize("value, reason", [
    (float("nan"), r"weight 'blocks\.0\.attn\.proj\.weight' is not finite"),
    (float("inf"), r"weight 'blocks\.0\.attn\.proj\.weight' is not finite"),
])
def test_resume_from_non_finite_weights_is_refused_naming_the_last_good_one(poisoned_copy, value, reason):
    steps = list_checkpoints(poisoned_copy)
    assert [p.name for p in steps] == ["step_00000004", "step_00000008", "step_00000012"]
    _poison(steps[-1], "blocks.0.attn.proj.weight", value)
    before = snapshot(poisoned_copy)
    with pytest.raises(ValueError, match=rf"step_00000012: cannot resume, {reason}; last good checkpoint: "
                                         rf".*step_00000008"):
        run(resume=poisoned_copy)
    assert snapshot(poisoned_copy) == before
    assert last_good_checkpoint(poisoned_copy) == steps[1]


def test_resume_from_finite_weights_with_non_finite_forward_is_refused(poisoned_copy, capsys):
    steps = list_checkpoints(poisoned_copy)
    _poison(steps[-1], "pos_embed", 3e38)  # finite, but the first LayerNorm overflows
    code = main(["train", "--resume", str(poisoned_copy)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "its forward on a fixed batch is not finite; last good checkpoint" in err[0]
    assert "step_00000008" in err[0]


def test_resume_from_a_good_checkpoint_still_works(poisoned_copy):
    steps = list_checkpoints(poisoned_copy)
    _poison(steps[-1], "blocks.0.attn.proj.weight", float("nan"))
    result = run(resume=steps[1])
    assert result.step == 12


def test_resume_given_a_file_names_what_was_found(finished_run, capsys):
    code = main(["train", "--resume", str(finished_run / "config.yaml")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "is a file; --resume takes a run directory" in err[0]


@pytest.mark.parametrize("header", [b'{"w": {"dtype": "F32", "shape": [2], "data_offsets": [0]}}',
                                    b'{"w": {"dtype": "F32", "shape": [2], "data_offsets": "xyz"}}',
                                    b'{"a":' * 50_000 + b"1" + b"}" * 50_000])
def test_resume_from_a_crafted_safetensors_header_is_one_line_exit_2(poisoned_copy, capsys, header):
    import struct

    target = list_checkpoints(poisoned_copy)[-1] / MODEL_FILE
    target.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 8)
    before = snapshot(poisoned_copy)
    assert main(["train", "--resume", str(poisoned_copy)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "corrupt safetensors header" in err[0], err
    assert snapshot(poisoned_copy) == before


def test_probe_of_an_iterable_dataset_uses_the_last_training_batch():
    from types import SimpleNamespace

    from torch.utils.data import DataLoader, IterableDataset

    from layerscale.train.distributed import DistContext
    from layerscale.train.state.finite_check import probe_forward_is_finite

    class Stream(IterableDataset):
        def __iter__(self):
            yield torch.zeros(3), 0

    class Scale(torch.nn.Module):
        def __init__(self, value):
            super().__init__()
            self.value = value

        def forward(self, x):
            return x * 0 + self.value

    trainer = SimpleNamespace(eval_loader=None, train_loader=DataLoader(Stream()), ctx=DistContext(), batch=None,
                              model=Scale(float("inf")))
    assert probe_forward_is_finite(trainer)  # nothing to try before the first step
    trainer.batch = (torch.zeros(2, 3), torch.zeros(2))
    assert not probe_forward_is_finite(trainer)
    trainer.model = Scale(1.0)
    assert probe_forward_is_finite(trainer) and trainer.model.training
