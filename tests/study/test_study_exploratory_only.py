"""``--primary none``: a design that names no primary family (methods added to another study's grid, none of them a
pre-registered claim): every comparison is exploratory, Benjamini–Hochberg-adjusted, and the tables say so."""

import argparse
import json

import pytest

from layerscale.stats.multiplicity import benjamini_hochberg
from layerscale.study.cli import add_arguments, build_spec
from layerscale.study.design.grid import StudySpec
from layerscale.study.report.committed import primary_verdict_lines
from layerscale.study.report.contrasts import depth_contrasts
from layerscale.study.report.summary import multiplicity_sentence, primary_lines
from layerscale.study.report.verdicts import EXPLORATORY, assign_families

from study_helpers import TINY_BASE
from test_study_statistics import _two_depth_cells


def _spec(**changes):
    return StudySpec(("prenorm", "layerscale"), (4, 16), (0, 1, 2), TINY_BASE, **changes)


def test_every_comparison_is_exploratory_and_bh_adjusted_together():
    spec = _spec(exploratory_only=True)
    assert spec.primary == () and spec.primary_cells() == set()
    cells, contrasts = assign_families(spec, _two_depth_cells(), depth_contrasts(spec, _two_depth_cells()))
    compared = [x for x in (*cells, *contrasts) if x.family]
    assert compared and all(x.family == EXPLORATORY for x in compared)
    assert [x.p_adj for x in compared] == pytest.approx(benjamini_hochberg([x.p_raw for x in compared]))
    sentence = multiplicity_sentence(cells, contrasts, True, exploratory_only=True)
    assert "names no primary family" in sentence and "Holm" not in sentence
    assert "None: the design names no primary family" in primary_lines(spec, cells, contrasts, metric=None)[2]


def test_the_default_family_still_applies_without_the_flag():
    assert _spec().primary == ("layerscale@16",)


def test_the_study_file_records_it_and_reads_it_back_and_others_stay_byte_identical():
    spec = _spec(exploratory_only=True)
    raw = json.loads(json.dumps(spec.to_dict()))
    assert raw["exploratory_only"] is True and raw["primary"] == []
    assert StudySpec.from_dict(raw) == spec
    assert "exploratory_only" not in _spec().to_dict()  # files written before the key existed read back unchanged


@pytest.mark.parametrize("changes", [dict(primary=("layerscale@16",)), dict(bootstrap=100), dict(primary_seeds=5)],
                         ids=["primary", "bootstrap", "primary-seeds"])
def test_a_family_option_beside_it_is_refused(changes):
    with pytest.raises(ValueError, match="--primary none names no primary family"):
        _spec(exploratory_only=True, **changes)


def test_the_command_line_drops_the_presets_family_options():
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args("--preset fashion --methods prenorm,attnres --depths 4,8 --primary none".split())
    spec = build_spec(args)
    assert spec.exploratory_only and spec.primary == () and spec.bootstrap == 0 and spec.primary_seeds == 0
    args = parser.parse_args("--preset fashion --methods prenorm,attnres --depths 4,8 --primary none "
                             "--bootstrap 100".split())
    with pytest.raises(ValueError, match="--primary none"):
        build_spec(args)


def test_the_demo_lines_call_it_exploratory(tmp_path):
    folder = tmp_path / "added"
    folder.mkdir()
    (folder / "results.csv").write_text("table,method,depth_from,depth,metric,family,verdict\n")
    (folder / "study.json").write_text(json.dumps({"primary_declared": True, "exploratory_only": True}))
    assert primary_verdict_lines(tmp_path) == ["- added: exploratory only (its design names no primary family)"]
