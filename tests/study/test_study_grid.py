import json

import pytest

from layerscale.study.grid import StudySpec
from study_helpers import TINY_BASE


def test_grid_sets_method_depth_seed_and_run_dir_only(tmp_path):
    spec = StudySpec(("prenorm", "layerscale"), (2, 4), (0, 1), TINY_BASE)
    runs = spec.runs(tmp_path)
    assert len(runs) == 8
    assert len({r.run_id for r in runs}) == 8
    first = runs[0]
    assert (first.method, first.depth, first.seed) == ("prenorm", 2, 0)
    assert first.config["model"]["residual"] == "prenorm" and first.config["model"]["depth"] == 2
    assert first.config["run"]["out_dir"] == str(tmp_path / "runs" / "prenorm-d2-s0")
    assert first.config["optim"] == TINY_BASE["optim"]
    assert "residual" not in TINY_BASE["model"]  # the base is not mutated


@pytest.mark.parametrize("kwargs, message", [
    (dict(methods=("prenorm", "magic")), "unknown residual method 'magic' in --methods; known methods:"),
    (dict(methods=()), "--methods is empty"),
    (dict(depths=(12, 0)), r"--depths must be positive integers, got \[12, 0\]"),
    (dict(depths=(12, 12)), r"--depths lists a value twice: \[12, 12\]"),
    (dict(seeds=()), "seeds must be integers"),
])
def test_bad_grids_are_one_line_errors(kwargs, message):
    args = dict(methods=("prenorm",), depths=(2,), seeds=(0,), base=TINY_BASE)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        StudySpec(**args)


def test_a_study_dir_of_another_grid_is_refused(tmp_path):
    spec = StudySpec(("prenorm",), (2,), (0,), TINY_BASE)
    (tmp_path / "study.json").write_text(json.dumps(spec.to_dict()))
    spec.check_compatible(tmp_path)  # same grid: fine
    other = StudySpec(("prenorm",), (2, 4), (0,), TINY_BASE)
    with pytest.raises(ValueError, match="different depths"):
        other.check_compatible(tmp_path)
