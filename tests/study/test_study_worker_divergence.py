"""A study run that stops on a non-finite step is a result: the worker's ``study_status.json`` says ``diverged`` at
the step the trainer's error carries."""

import json
import os

import layerscale.train.runner as runner
from layerscale.study.run.worker import STATUS_FILE, main, read_status
from layerscale.train import NonFiniteError


def test_the_worker_records_the_step_of_a_divergence(tmp_path, monkeypatch):
    def diverging(*args, **kwargs):
        raise NonFiniteError("weights are non-finite (blocks.0.mlp.fc2.bias) after step 5; not checkpointed", step=5)

    monkeypatch.setattr(runner, "run", diverging)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model": {"name": "vit"}}))
    run_dir = tmp_path / "run"
    assert main([str(os.getppid()), str(run_dir), str(config), "1"]) == 0
    status = read_status(run_dir)
    assert (status["status"], status["step"], status["diverged_step"]) == ("diverged", 5, 5)
    assert status["message"].startswith("weights are non-finite") and (run_dir / STATUS_FILE).is_file()
