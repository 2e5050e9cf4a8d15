"""Validation split, early stopping, pausing at a step and the one test evaluation (issue 11)."""

import pytest
import torch
from train_helpers import final_weights, tiny_config

from layerscale.data.registry import load_dataset
from layerscale.data.split import split_off_validation
from layerscale.data.text import ByteWindowDataset
from layerscale.train import run
from layerscale.train.loop.early_stopping import EarlyStopping
from layerscale.train.records.metrics_log import read_metrics


def _records(run_dir, split):
    return [r for r in read_metrics(run_dir / "metrics.jsonl") if r.get("split") == split]


def test_the_validation_split_is_carved_from_training_stratified_and_never_touches_test():
    bundle = load_dataset("digits", test_fraction=0.2, seed=0)
    train, validation = split_off_validation(bundle.train, 0.2, seed=0)
    flat = lambda images: {bytes(x.numpy().tobytes()) for x in images}  # noqa: E731
    train_images, val_images, test_images = flat(train.images), flat(validation.images), flat(bundle.test.images)
    assert len(train) + len(validation) == len(bundle.train)
    assert not (val_images & test_images) and not (train_images & test_images)
    assert val_images <= flat(bundle.train.images)
    for cls in range(10):  # stratified: every class keeps its share (to rounding)
        total = int((bundle.train.labels == cls).sum())
        assert int((validation.labels == cls).sum()) == round(total * 0.2)
    assert validation.transform is None  # never augmented
    again = split_off_validation(bundle.train, 0.2, seed=0)[1]
    assert torch.equal(again.images, validation.images)  # fixed by the seed


def test_text_validation_is_the_end_of_the_training_text():
    tokens = torch.arange(1000, dtype=torch.int64) % 256
    train, validation = split_off_validation(ByteWindowDataset(tokens.to(torch.uint8), 8), 0.1, seed=0)
    assert train.tokens.numel() == 900 and torch.equal(validation.tokens, tokens[900:].to(torch.uint8))


def test_bad_validation_fractions_are_one_line_errors():
    bundle = load_dataset("digits")
    with pytest.raises(ValueError, match=r"validation_fraction must be in \(0, 1\)"):
        split_off_validation(bundle.train, 1.0, 0)
    with pytest.raises(ValueError, match="needs an in-memory image or text dataset"):
        split_off_validation([1, 2, 3], 0.5, 0)


def test_periodic_evaluation_reads_validation_and_the_test_split_is_read_once_at_the_end(tmp_path):
    config = tiny_config(data={"validation_fraction": 0.2}, run={"eval_every_steps": 4})
    result = run(config, out=tmp_path / "r")
    evals, tests = _records(tmp_path / "r", "eval"), _records(tmp_path / "r", "test")
    assert evals and all(r["on"] == "validation" for r in evals)
    assert evals[0]["samples"] == 287  # 20 % of the 1,437 training images, rounded per class
    assert len(tests) == 1 and tests[0]["step"] == result.step == 12 and tests[0]["samples"] == 359  # the whole test split


def test_tuning_runs_never_read_the_test_split(tmp_path):
    config = tiny_config(data={"validation_fraction": 0.2}, run={"evaluate_test": False})
    run(config, out=tmp_path / "r")
    assert _records(tmp_path / "r", "test") == []


def test_a_paused_run_continued_equals_one_never_paused(tmp_path):
    base = tiny_config(data={"validation_fraction": 0.2},
                       run={"eval_every_steps": 4, "checkpoint_every_steps": 5, "keep_checkpoints": 5})
    paused = run(tiny_config(**{**base, "run": {**base["run"], "stop_at_step": 5}}), out=tmp_path / "paused")
    assert paused.step == 5 and _records(tmp_path / "paused", "test") == []
    continued = run(resume=tmp_path / "paused", overrides=["run.stop_at_step=0"])
    assert continued.step == 12
    assert run(base, out=tmp_path / "straight").step == continued.step
    expected, got = final_weights(tmp_path / "straight"), final_weights(tmp_path / "paused")
    for name in expected:
        assert torch.equal(expected[name], got[name]), f"{name} differs after pausing"
    assert _records(tmp_path / "paused", "test")[0]["accuracy"] == _records(tmp_path / "straight", "test")[0]["accuracy"]



def test_a_pause_between_checkpoints_with_random_augmentation_continues_exactly(tmp_path):
    """The pause's checkpoint holds the random state after the last step trained: the loop must not draw the next
    batch (its augmentation takes random numbers) before it stops."""
    base = tiny_config(data={"validation_fraction": 0.2, "augment": True}, model={"drop_path_rate": 0.1},
                       run={"checkpoint_every_steps": 4, "keep_checkpoints": 5})
    paused = run(tiny_config(**{**base, "run": {**base["run"], "stop_at_step": 5}}), out=tmp_path / "paused")
    assert paused.step == 5
    assert run(resume=tmp_path / "paused", overrides=["run.stop_at_step=0"]).step == 12
    run(base, out=tmp_path / "straight")
    expected, got = final_weights(tmp_path / "straight"), final_weights(tmp_path / "paused")
    for name in expected:
        assert torch.equal(expected[name], got[name]), f"{name} differs after a pause at step 5"

def test_early_stopping_ends_the_run_and_survives_a_resume(tmp_path):
    # lr 0 after warmup: nothing improves, so the run stops after `patience` flat evaluations
    config = tiny_config(data={"validation_fraction": 0.2}, optim={"max_steps": 40, "lr": 1e-9, "min_lr": 0.0},
                         run={"eval_every_steps": 2, "patience": 2, "checkpoint_every_steps": 2})
    result = run(config, out=tmp_path / "r")
    events = [r for r in read_metrics(tmp_path / "r" / "metrics.jsonl") if r.get("event") == "early_stop"]
    assert len(events) == 1 and result.step < 40
    assert len(_records(tmp_path / "r", "test")) == 1
    again = run(resume=tmp_path / "r")  # a stopped run stays stopped
    assert again.step == result.step


def test_early_stopping_rule():
    stopping = EarlyStopping(patience=2, min_delta=0.01, mode="max")
    assert not stopping.update(0.50, 1)
    assert not stopping.update(0.505, 2)  # not by more than min_delta
    assert stopping.update(0.509, 3) and stopping.stopped_step == 3 and stopping.best_step == 1
    loss = EarlyStopping(patience=1, mode="min")
    assert not loss.update(2.0, 1) and not loss.update(1.5, 2) and loss.update(float("nan"), 3)
    restored = EarlyStopping(patience=1, mode="min")
    restored.load_state_dict(loss.state_dict())
    assert restored.stopped and restored.best == 1.5


def test_a_diagnostics_record_carries_the_epoch_of_its_own_step(tmp_path):
    """The diagnostics callback writes at the optimizer's post-hook, before the trainer counts the step: its
    record's epoch was one step behind the train record of the same step."""
    config = tiny_config(run={"log_every_steps": 1}, diagnostics={"every": 1})
    run(config, out=tmp_path / "r")
    records = read_metrics(tmp_path / "r" / "metrics.jsonl")
    train = {r["step"]: r["epoch"] for r in records if r.get("split") == "train" and "event" not in r}
    diagnostics = {r["step"]: r["epoch"] for r in records if r.get("split") == "diagnostics"}
    assert len(diagnostics) >= 10 and set(diagnostics) <= set(train)
    assert {step: train[step] for step in diagnostics} == diagnostics


def test_a_diagnostics_callback_passed_from_python_replaces_the_configs(tmp_path):
    """docs/diagnostics.md's example passes DiagnosticsCallback(every=20) to run(): with the config's monitor on by
    default, two monitors wrote two records for step 1."""
    from layerscale.diagnostics.callback import DiagnosticsCallback

    run(tiny_config(optim={"max_steps": 20}), out=tmp_path / "r", callbacks=[DiagnosticsCallback(every=20)])
    steps = [r["step"] for r in read_metrics(tmp_path / "r" / "metrics.jsonl") if r.get("split") == "diagnostics"]
    assert steps == [1, 20]


@pytest.mark.parametrize("validation_fraction, warned", [(0.0, True), (0.1, False)])
def test_early_stopping_on_the_test_split_is_said_on_stderr(tmp_path, capsys, validation_fraction, warned):
    """Without a validation split, evaluations read the test split, so run.patience stops on it (audit
    2026-12-07: documented, but nothing said so when it happened)."""
    config = tiny_config(data={"validation_fraction": validation_fraction},
                         run={"patience": 2, "eval_every_steps": 4, "progress": "log"})
    run(config, out=tmp_path / "run")
    err = capsys.readouterr().err
    assert ("warning: run.patience 2 stops on the test split (the run has no validation split)" in err) is warned


def test_an_image_folders_val_beside_test_is_the_runs_validation_split(tmp_path):
    """A ``train/ val/ test/`` folder: periodic evaluation reads ``val/``, the test split is ``test/`` (``val/`` was
    passed over without a word, audit 2026-12-07, section 10)."""
    Image = pytest.importorskip("PIL.Image", reason="Pillow is not installed")
    from layerscale.train.config.schema import TrainConfig
    from layerscale.train.setup.data_setup import load_train_data

    for split, count in (("train", 4), ("val", 2), ("test", 1)):
        for name, colour in (("a", (255, 0, 0)), ("b", (0, 0, 255))):
            (tmp_path / split / name).mkdir(parents=True)
            for i in range(count):
                Image.new("RGB", (8, 8), colour).save(tmp_path / split / name / f"{i}.png")
    config = tiny_config(data={"name": "imagefolder", "path": str(tmp_path), "img_size": 8})
    loaded = load_train_data(TrainConfig.from_dict(config))
    assert (len(loaded.train), len(loaded.validation), len(loaded.eval)) == (8, 4, 2)
    assert loaded.description.endswith("; validation: 4 images (the folder's val/)")
    with pytest.raises(ValueError, match="val/ is the validation split; validation_fraction 0.1 would carve"):
        load_train_data(TrainConfig.from_dict(tiny_config(data={**config["data"], "validation_fraction": 0.1})))
