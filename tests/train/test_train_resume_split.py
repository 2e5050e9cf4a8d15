"""A resumed run keeps the split it trained on: a --set on resume that changes which examples are held out
(data.split_seed, data.test_fraction, data.validation_fraction, the dataset) is refused in one line, before anything
is written; other keys still change (here the epochs). Before, the resume ran and its "test" score then read
examples the model had trained on (247 of 359 after data.split_seed 0 -> 1; audit 2026-12-07)."""

import pytest

from layerscale.train import run
from train_helpers import tiny_config


@pytest.fixture(scope="module")
def paused(tmp_path_factory):
    folder = tmp_path_factory.mktemp("paused") / "run"
    config = tiny_config(data={"validation_fraction": 0.1}, run={"stop_at_step": 4, "checkpoint_every_steps": 4})
    run(config, out=folder)
    return folder


def _files(folder):
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("change", ["data.split_seed=1", "data.test_fraction=0.5", "data.validation_fraction=0.3",
                                    "data.name=fashion-mnist"])
def test_a_change_of_split_on_resume_is_refused_and_writes_nothing(paused, change):
    before = _files(paused)
    key, value = change.split("=")
    with pytest.raises(ValueError, match=rf"{key} .* -> .* on resume would change which examples are held out") \
            as refused:
        run(resume=paused, overrides=[change, "run.stop_at_step=0"])
    assert "\n" not in str(refused.value)
    assert _files(paused) == before


def test_another_key_still_changes_on_resume(paused):
    result = run(resume=paused, overrides=["run.stop_at_step=8", "optim.lr=0.001"])
    assert result.step == 8 and result.run_dir == paused
