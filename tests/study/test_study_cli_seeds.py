"""``--seeds`` far beyond any study (issue 30, item 6): one line, status 2, before a plan of 10**11 runs is built."""


def test_an_absurd_seed_count_is_one_line_before_any_plan(tmp_path, capsys):
    from layerscale.cli import main

    assert main(["study", "--preset", "demo", "--seeds", str(10**11), "--out", str(tmp_path / "s"), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err == ("layerscale study: error: --seeds must be in 1..1000 (seeds 0 .. N-1 of every cell), got "
                   "100000000000\n")
    assert not (tmp_path / "s").exists()
