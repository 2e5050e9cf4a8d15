"""``run(...)`` refuses bad callbacks and a string of overrides before the run directory is made."""
import pytest
from train_helpers import tiny_config

from layerscale.train import Callback, run


class _OnlyStart:  # a duck-typed callback missing hooks the trainer calls
    def on_train_start(self, trainer):
        pass


@pytest.mark.parametrize("callbacks", [[3], [Callback(), "x"], [_OnlyStart()], 3, "cb"])
def test_bad_callbacks_are_refused_before_the_run_directory_exists(tmp_path, callbacks):
    out = tmp_path / "R"
    with pytest.raises(ValueError, match="callbacks") as exc:
        run(tiny_config(optim={"max_steps": 1}), callbacks=callbacks, out=out)
    assert "\n" not in str(exc.value)
    assert not out.exists()


def test_missing_hooks_are_named(tmp_path):
    with pytest.raises(ValueError, match=r"callbacks\[0\]: _OnlyStart .* has no on_step_end, on_eval_end"):
        run(tiny_config(), callbacks=[_OnlyStart()], out=tmp_path / "R")


@pytest.mark.parametrize("overrides", ["optim.lr=0.1", b"optim.lr=0.1", ["optim.lr=0.1", 3], {"optim.lr": 0.1}])
def test_overrides_must_be_a_list_of_strings(tmp_path, overrides):
    out = tmp_path / "R"
    with pytest.raises(ValueError, match="overrides") as exc:
        run(tiny_config(), overrides=overrides, out=out)
    assert "key=value" in str(exc.value) and "\n" not in str(exc.value)
    assert not out.exists()


def test_good_callbacks_and_overrides_still_run(tmp_path):
    seen = []

    class Recorder(Callback):
        def on_train_end(self, trainer):
            seen.append(trainer.state.step)

    result = run(tiny_config(optim={"max_steps": 2, "warmup_steps": 1}), overrides=("optim.lr=0.001",),
                 callbacks=(Recorder(),), out=tmp_path / "R")
    assert result.step == 2 and seen == [2]
