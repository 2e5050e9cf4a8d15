import math

import pytest

from layerscale.study.design.grid import StudySpec
from layerscale.study.run.rate_search import tune_study
from layerscale.study.run.tuning import (choose_rate, extension_for_best, extension_rate, rung_steps, run_score,
                                         select)
from study_helpers import TINY_BASE, write_fake_run


@pytest.mark.parametrize("total, n, expected", [
    (100, 3, [25]),            # 3 rates, eta 3: one rung, one survivor
    (100, 5, [25, 75]),        # 5 -> 2 -> 1
    (100, 9, [25, 75]),        # 9 -> 3 -> 1
    (100, 1, []),              # nothing to tune
    (10, 30, [3, 8, 10]),      # 30 -> 10 -> 4 -> best; the last rung capped at the full budget
])
def test_rung_steps(total, n, expected):
    assert rung_steps(total, n, 0.25, 3) == expected


def test_select_keeps_the_best_and_breaks_ties_by_list_order():
    scores = {1e-3: 0.8, 3e-3: 0.9, 3e-4: 0.9, 1e-2: -math.inf}
    assert select(scores, (3e-4, 1e-3, 3e-3, 1e-2), 2) == (3e-4, 3e-3)


def test_run_score_reads_the_last_validation_evaluation_before_the_rung(tmp_path):
    write_fake_run(tmp_path / "r", [0.5, 0.7, 0.9], [1.0, 0.8, 0.6])
    assert run_score(tmp_path / "r", 25, True) == 0.7
    assert run_score(tmp_path / "r", 25, False) == -0.8
    assert run_score(tmp_path / "r", 5, True) == -math.inf
    assert run_score(tmp_path / "r", 25, True, diverged=True) == -math.inf


def _fake_pool(accuracy_of):
    """A process pool stand-in: each run 'trains' by writing validation accuracies that depend on its rate."""
    calls = []

    def pool(runs, desc):
        calls.append(sorted((r.method, r.depth, r.lr, r.stop_at_step) for r in runs))
        for r in runs:
            acc = accuracy_of(r.method, r.lr)
            write_fake_run(r.run_dir, [acc * k / 10 for k in range(1, r.stop_at_step // 10 + 1)],
                           [1.0] * (r.stop_at_step // 10), status="paused", step=r.stop_at_step)
        return []
    return pool, calls


def test_the_chosen_rate_is_the_one_with_the_best_validation_score(tmp_path):
    best = {"prenorm": 3e-3, "layerscale": 3e-4}
    spec = StudySpec(("prenorm", "layerscale"), (2,), (0, 1), TINY_BASE, lrs=(3e-4, 1e-3, 3e-3, 1e-2, 3e-2),
                     tune_seeds=1, min_budget=0.25, extend_grid=0)
    pool, calls = _fake_pool(lambda m, lr: 0.9 - abs(math.log10(lr) - math.log10(best[m])) / 10)
    out = tune_study(spec, tmp_path, 100, True, pool)
    chosen, rungs, failures = out.chosen, out.rungs, out.failures
    assert chosen == {("prenorm", 2): 3e-3, ("layerscale", 2): 3e-4} and not failures
    # rung 0: all 5 rates of both cells at 25 steps; rung 1: the best 2 of each at 75 steps
    assert [len(c) for c in calls] == [10, 4]
    assert {stop for *_, stop in calls[0]} == {25} and {stop for *_, stop in calls[1]} == {75}
    assert rungs[("prenorm", 2)][0].kept == (3e-3, 1e-3)
    assert (tmp_path / "tuning.json").is_file()


def test_a_diverged_rate_is_never_chosen(tmp_path):
    spec = StudySpec(("prenorm",), (2,), (0,), TINY_BASE, lrs=(1e-3, 3e-3), tune_seeds=1, extend_grid=0)

    def pool(runs, desc):
        for r in runs:
            status = "diverged" if r.lr == 3e-3 else "paused"
            write_fake_run(r.run_dir, [0.99 if r.lr == 3e-3 else 0.5], [1.0], status=status, step=r.stop_at_step)
        return []
    chosen = tune_study(spec, tmp_path, 100, True, pool).chosen
    assert chosen == {("prenorm", 2): 1e-3}


def test_a_cell_whose_rung_is_unfinished_has_no_tuned_rate_yet(tmp_path):
    spec = StudySpec(("prenorm",), (2,), (0,), TINY_BASE, lrs=(1e-3, 3e-3), tune_seeds=1, extend_grid=0)

    def pool(runs, desc):  # only one of the two rates got to its rung (a study interrupted, rebuilt with --report-only)
        write_fake_run(runs[0].run_dir, [0.9], [1.0], status="paused", step=runs[0].stop_at_step)
        return []
    out = tune_study(spec, tmp_path, 100, True, pool)
    chosen, rungs = out.chosen, out.rungs
    assert chosen == {("prenorm", 2): None} and rungs[("prenorm", 2)] == []
    assert spec.final_runs(tmp_path, chosen) and all(r.lr == spec.shared_lr for r in spec.final_runs(tmp_path, chosen))


# ------------------------------------------------------------------------------ the sounder rate selection (#25)
def test_choose_rate_reports_a_tie_and_resolves_it_toward_the_shared_rate():
    # 3e-3 is ahead by 0.005 on average, but the seed-to-seed differences (0.02, -0.01) make that one standard error
    choice = choose_rate({1e-3: (0.80, 0.82), 3e-3: (0.78, 0.85)}, shared_lr=1e-3)
    assert choice.best == 3e-3 and choice.is_tie and choice.tied == (1e-3, 3e-3) and choice.lr == 1e-3


def test_choose_rate_a_clear_winner_is_no_tie():
    choice = choose_rate({1e-3: (0.80, 0.81, 0.80), 3e-3: (0.85, 0.86, 0.85)}, shared_lr=1e-3)
    assert choice.lr == 3e-3 and not choice.is_tie


def test_two_rates_at_chance_are_a_tie_not_an_edge_choice():
    # every rate scores exactly the same (a model at chance): the shared rate is taken and the tie reported
    choice = choose_rate({3e-4: (0.1,), 1e-3: (0.1,), 3e-3: (0.1,)}, shared_lr=1e-3, order=(3e-4, 1e-3, 3e-3))
    assert choice.lr == 1e-3 and choice.tied == (3e-4, 1e-3, 3e-3)


def test_choose_rate_all_diverged_takes_the_shared_rate():
    choice = choose_rate({1e-3: (-math.inf, -math.inf), 3e-3: (-math.inf, -math.inf)}, shared_lr=1e-3)
    assert choice.lr == 1e-3 and choice.is_tie


def test_extension_rate_steps_outward_by_three():
    assert extension_rate((3e-4, 1e-3, 3e-3), 3e-3) == 9e-3
    assert extension_rate((3e-4, 1e-3, 3e-3), 3e-4) == 1e-4
    assert extension_rate((3e-4, 1e-3, 3e-3), 1e-3) is None
    assert extension_rate((1e-3,), 1e-3) is None


def test_halving_scores_the_mean_over_the_tuning_seeds(tmp_path):
    """Two tuning seeds from half the budget: seed 1001 reverses seed 1000's ranking, and the mean decides."""
    spec = StudySpec(("prenorm",), (2,), (0, 1, 2), TINY_BASE, lrs=(1e-3, 3e-3), extend_grid=0)
    assert spec.tuning_seeds == (1000, 1001) and spec.min_budget == 0.5
    table = {(1e-3, 1000): 0.70, (3e-3, 1000): 0.72, (1e-3, 1001): 0.80, (3e-3, 1001): 0.60}
    calls = []

    def pool(runs, desc):
        calls.append(sorted((r.lr, r.seed, r.stop_at_step) for r in runs))
        for r in runs:
            write_fake_run(r.run_dir, [table[(r.lr, r.seed)]] * (r.stop_at_step // 10), [1.0] * (r.stop_at_step // 10),
                           status="paused", step=r.stop_at_step)
        return []
    out = tune_study(spec, tmp_path, 100, True, pool)
    assert calls == [[(1e-3, 1000, 50), (1e-3, 1001, 50), (3e-3, 1000, 50), (3e-3, 1001, 50)]]
    assert out.chosen == {("prenorm", 2): 1e-3}
    assert out.rungs[("prenorm", 2)][0].per_seed[3e-3] == (0.72, 0.60)
    assert {r.seed for r in out.tune_runs} == {1000, 1001}


def test_an_edge_choice_triggers_an_extension_whose_runs_happen(tmp_path):
    """The best rate is the largest of the grid: the study adds 3x that rate, trains it, and settles there."""
    spec = StudySpec(("prenorm",), (2,), (0,), TINY_BASE, lrs=(3e-4, 1e-3), tune_seeds=1, extend_grid=2)
    accuracy = {3e-4: 0.5, 1e-3: 0.6, 3e-3: 0.7, 9e-3: 0.65}
    trained = []

    def pool(runs, desc):
        for r in runs:
            trained.append(r.lr)
            write_fake_run(r.run_dir, [accuracy[r.lr]] * (r.stop_at_step // 10), [1.0] * (r.stop_at_step // 10),
                           status="paused", step=r.stop_at_step)
        return []
    out = tune_study(spec, tmp_path, 100, True, pool)
    assert trained == [3e-4, 1e-3, 3e-3, 9e-3]  # the grid, then two extensions (3e-3 was again at the edge)
    assert out.chosen[("prenorm", 2)] == 3e-3
    assert out.extended[("prenorm", 2)] == (3e-3, 9e-3) and out.rates[("prenorm", 2)] == (3e-4, 1e-3, 3e-3, 9e-3)
    import json
    record = json.loads((tmp_path / "tuning.json").read_text())["cells"][0]
    assert record["extended_with"] == [3e-3, 9e-3] and record["chosen_lr"] == 3e-3


def test_grid_mode_chooses_by_full_budget_validation_of_the_final_seeds(tmp_path):
    spec = StudySpec(("prenorm",), (2,), (0, 1, 2), TINY_BASE, lrs=(1e-3, 3e-3), tuning="grid", extend_grid=0)
    seen = []

    def pool(runs, desc):
        for r in runs:
            seen.append((r.kind, r.lr, r.seed, r.stop_at_step))
            acc = 0.8 + 0.01 * r.seed + (0.05 if r.lr == 1e-3 else 0.0)
            write_fake_run(r.run_dir, [acc] * 10, [1.0] * 10, status="finished", step=100, test_accuracy=0.5)
        return []
    out = tune_study(spec, tmp_path, 100, True, pool)
    assert sorted(seen) == sorted(("final", lr, s, 0) for lr in (1e-3, 3e-3) for s in (0, 1, 2))
    assert out.chosen == {("prenorm", 2): 1e-3} and out.tune_runs == []
    finals = spec.final_runs(tmp_path, out.chosen, every_rate=out.rates)
    assert {(r.lr, r.seed) for r in finals} == {(lr, s) for lr in (1e-3, 3e-3) for s in (0, 1, 2)}


# ---- issue 60: the extension reads the best mean, and the tie rule chooses only after it --------------------------

def _grid_pool(val_of, trained):
    """A grid-mode pool: each final run 'trains' to the validation accuracy ``val_of(lr, seed)``."""
    def pool(runs, desc):
        for r in runs:
            trained.append((r.lr, r.seed))
            write_fake_run(r.run_dir, [val_of(r.lr, r.seed)] * 10, [1.0] * 10, status="finished", step=100,
                           test_accuracy=0.5)
        return []
    return pool


# the best mean at 3e-3 (the top edge) by 0.001, tied with the shared 1e-3 by the one-standard-error rule
EDGE_TIE = {3e-4: (0.80, 0.81, 0.79), 1e-3: (0.870, 0.880, 0.872), 3e-3: (0.875, 0.874, 0.876)}


def test_a_best_mean_at_an_edge_is_extended_though_the_tie_rule_would_choose_inside(tmp_path):
    """Planted grid: the tie rule alone takes 1e-3 (inside), but the best mean is 3e-3, the largest rate: the study
    adds 9e-3 first, and only then does the tie rule choose, among all four rates."""
    choice = choose_rate(EDGE_TIE, shared_lr=1e-3, order=(3e-4, 1e-3, 3e-3))
    assert choice.best == 3e-3 and choice.lr == 1e-3 and choice.is_tie  # what used to stop the extension
    spec = StudySpec(("prenorm",), (2,), (0, 1, 2), TINY_BASE, lrs=(3e-4, 1e-3, 3e-3), tuning="grid",
                     extend_grid=1)
    scores = {**EDGE_TIE, 9e-3: (0.890, 0.892, 0.891)}
    trained = []
    out = tune_study(spec, tmp_path, 100, True, _grid_pool(lambda lr, s: scores[lr][s], trained))
    assert {lr for lr, _ in trained} == {3e-4, 1e-3, 3e-3, 9e-3}
    assert sorted(s for lr, s in trained if lr == 9e-3) == [0, 1, 2]  # the cell's own seeds
    assert out.extended[("prenorm", 2)] == (9e-3,) and not out.pending
    assert out.chosen[("prenorm", 2)] == 9e-3  # the tie rule, after the extension, over every rate tried


def test_a_best_mean_inside_the_grid_is_not_extended(tmp_path):
    spec = StudySpec(("prenorm",), (2,), (0, 1, 2), TINY_BASE, lrs=(3e-4, 1e-3, 3e-3), tuning="grid",
                     extend_grid=1)
    inside = {3e-4: (0.80, 0.81, 0.79), 1e-3: (0.880, 0.882, 0.881), 3e-3: (0.875, 0.874, 0.876)}
    trained = []
    out = tune_study(spec, tmp_path, 100, True, _grid_pool(lambda lr, s: inside[lr][s], trained))
    assert {lr for lr, _ in trained} == {3e-4, 1e-3, 3e-3}
    assert out.extended[("prenorm", 2)] == () and out.chosen[("prenorm", 2)] == 1e-3


def test_a_best_mean_shared_by_every_rate_is_at_no_edge():
    at_chance = {3e-4: (0.1, 0.1), 1e-3: (0.1, 0.1), 3e-3: (0.1, 0.1)}
    choice = choose_rate(at_chance, shared_lr=1e-3, order=(3e-4, 1e-3, 3e-3))
    assert extension_for_best(at_chance, (3e-4, 1e-3, 3e-3), choice) is None
    failed = {1e-3: (-math.inf,), 3e-3: (-math.inf,)}
    assert extension_for_best(failed, (1e-3, 3e-3), choose_rate(failed, shared_lr=1e-3)) is None
    assert extension_for_best(EDGE_TIE, (3e-4, 1e-3, 3e-3), choose_rate(EDGE_TIE, 1e-3)) == 9e-3


def test_a_pending_extension_keeps_the_grid_choice_provisional_and_says_so(tmp_path, capsys):
    """The extension's runs have not run (report only): under --tuning grid the cell keeps the tie rule's choice
    among the rates that ran, ``tuning.json`` lists the pending rate, the tables say so, and --dry-run lists the
    extension's runs."""
    import json

    from layerscale.study.report.summary import extension_pending_sentence, grid_edge_sentence
    from layerscale.study.run.executors.dry_run import describe_plan
    from layerscale.study.run.executors.options import ExecutorOptions

    spec = StudySpec(("prenorm",), (2,), (0, 1, 2), TINY_BASE, lrs=(3e-4, 1e-3, 3e-3), tuning="grid",
                     extend_grid=1)
    trained = []
    grid_only = _grid_pool(lambda lr, s: EDGE_TIE[lr][s], trained)
    tune_study(spec, tmp_path, 100, True, lambda runs, desc: grid_only([r for r in runs if r.lr != 9e-3], desc))
    out = tune_study(spec, tmp_path, 100, True, lambda runs, desc: [])  # --report-only
    cell = ("prenorm", 2)
    assert out.pending == {cell: (9e-3,)} and out.extended[cell] == ()
    assert out.chosen[cell] == 1e-3 and out.choices[cell].best == 3e-3  # provisional: the tie rule's choice so far
    assert 9e-3 in out.rates[cell]  # its final runs are listed (pending) in runs.csv
    record = json.loads((tmp_path / "tuning.json").read_text())["cells"][0]
    assert record["extension_pending"] == [9e-3] and record["extended_with"] == []
    sentence = extension_pending_sentence(out)
    assert "prenorm at depth 2 (best mean at 0.003, the largest tried; 0.009 to run" in sentence
    assert "the tie rule's choice among the rates that ran, 0.001" in sentence
    assert grid_edge_sentence(spec, out) is None  # no longer "still at an edge": the extension is planned
    text = describe_plan(spec, tmp_path, 100, "fake data", ExecutorOptions(), jobs=1, threads=1)
    assert "prenorm at depth 2 adds 0.009: 3 run(s)" in text
    assert sum("prenorm-d2-lr0.009-s" in line and "to run" in line for line in text.splitlines()) == 3


def test_a_pending_extension_under_halving_leaves_the_cell_unchosen(tmp_path):
    spec = StudySpec(("prenorm",), (2,), (0,), TINY_BASE, lrs=(3e-4, 1e-3), tune_seeds=1, extend_grid=1)

    def pool(runs, desc):
        for r in runs:
            if r.lr != 3e-3:
                write_fake_run(r.run_dir, [0.5 if r.lr == 3e-4 else 0.6] * (r.stop_at_step // 10),
                               [1.0] * (r.stop_at_step // 10), status="paused", step=r.stop_at_step)
        return []
    out = tune_study(spec, tmp_path, 100, True, pool)
    assert out.pending == {("prenorm", 2): (3e-3,)} and out.chosen[("prenorm", 2)] is None
