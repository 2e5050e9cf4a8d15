"""``--seeds`` far beyond any study (issue 30, item 6): one line, status 2, before a plan of 10**11 runs is built."""


def test_an_absurd_seed_count_is_one_line_before_any_plan(tmp_path, capsys):
    from layerscale.cli import main

    assert main(["study", "--preset", "demo", "--seeds", str(10**11), "--out", str(tmp_path / "s"), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err == ("layerscale study: error: --seeds must be in 1..1000 (seeds 0 .. N-1 of every cell), got "
                   "100000000000\n")
    assert not (tmp_path / "s").exists()


def test_a_dry_run_names_the_preset_seeds_the_primary_family_keeps(tmp_path, capsys):
    """``--preset fashion --seeds 3`` keeps the preset's 5 seeds in the primary family's cells: the plan says so
    (it printed only "seeds [0, 1, 2]" over a count of runs that did not add up)."""
    from layerscale.cli import main

    assert main(["study", "--preset", "fashion", "--seeds", "3", "--out", str(tmp_path / "s"), "--dry-run"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("rate grid:"))
    assert "seeds [0, 1, 2] (seeds 0 .. 4 in the primary family's cells deepnorm@48, dyt@48" in line
    assert not (tmp_path / "s").exists()
