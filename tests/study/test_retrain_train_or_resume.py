"""``train_or_resume``: an evidence run is kept when it ended, trained when it has not started, and a divergence is
recorded as a result (its message and step) that a later pass keeps."""

import json

import pytest

import layerscale.train.runner as runner
from layerscale.study.run.retrain import DIVERGED_FILE, run_outcome, train_or_resume
from layerscale.train import NonFiniteError

CONFIG = {
    "model": {"name": "vit", "embed_dim": 16, "depth": 1, "num_heads": 2, "patch_size": 4},
    "data": {"name": "digits", "batch_size": 32},
    "optim": {"epochs": 1, "max_steps": 4, "warmup_steps": 1, "lr": 1e-3},
    "run": {"progress": "none", "log_every_steps": 2},
}


def test_a_new_run_is_trained_and_a_finished_one_kept(tmp_path):
    run_dir = tmp_path / "runs" / "a"
    assert train_or_resume(run_dir, CONFIG) == "trained"
    assert (run_dir / "summary.json").is_file()
    before = (run_dir / "metrics.jsonl").read_bytes()
    assert train_or_resume(run_dir, CONFIG) == "kept"
    assert (run_dir / "metrics.jsonl").read_bytes() == before
    assert run_outcome(run_dir, classification=True)["status"] == "finished"


def test_a_folder_without_a_checkpoint_is_cleared_and_trained_from_its_start(tmp_path):
    run_dir = tmp_path / "a"
    run_dir.mkdir()
    (run_dir / "left_over.txt").write_text("from a process that ended before its first checkpoint")
    assert train_or_resume(run_dir, CONFIG) == "trained"
    assert not (run_dir / "left_over.txt").exists() and (run_dir / "summary.json").is_file()


def test_a_divergence_is_recorded_with_its_step_and_kept(tmp_path, monkeypatch):
    calls = []

    def diverging(*args, **kwargs):
        calls.append(kwargs)
        raise NonFiniteError("non-finite loss at step 3 (epoch 1): ...; run stopped", step=3)

    monkeypatch.setattr(runner, "run", diverging)
    run_dir = tmp_path / "a"
    assert train_or_resume(run_dir, CONFIG) == "diverged"
    record = json.loads((run_dir / DIVERGED_FILE).read_text(encoding="utf-8"))
    assert record == {"message": "non-finite loss at step 3 (epoch 1): ...; run stopped", "step": 3}
    outcome = run_outcome(run_dir, classification=True)
    assert (outcome["status"], outcome["steps"], outcome["test"]) == ("diverged", 3, None)
    assert train_or_resume(run_dir, CONFIG) == "kept" and len(calls) == 1


@pytest.mark.parametrize("step", [7, None])
def test_the_error_carries_its_step_through_pickling(step):
    import pickle

    error = pickle.loads(pickle.dumps(NonFiniteError("message", step=step)))
    assert (str(error), error.step) == ("message", step)


def test_a_run_another_live_process_trains_is_refused_and_left_untouched(tmp_path, monkeypatch):
    import fcntl

    from layerscale.train.state.run_lock import LOCK_FILE, RunDirectoryInUse

    run_dir = tmp_path / "a"
    run_dir.mkdir()
    (run_dir / "metrics.jsonl").write_text('{"step": 1}\n')  # the other process's partial records, no checkpoint
    monkeypatch.setattr(runner, "run", lambda *a, **k: pytest.fail("trained a run another process holds"))
    with open(run_dir / LOCK_FILE, "a") as other:  # another open file description: as another process's flock
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(RunDirectoryInUse, match="in use by"):
            train_or_resume(run_dir, CONFIG)
    assert (run_dir / "metrics.jsonl").read_text() == '{"step": 1}\n'


def test_each_outcome_reads_as_one_progress_line_and_a_kept_run_as_none():
    from layerscale.study.run.retrain import outcome_text

    assert [outcome_text(o, 12.4) for o in ("kept", "trained", "resumed", "diverged")] == [
        None, "trained (12 s)", "resumed and trained (12 s)", "diverged"]
