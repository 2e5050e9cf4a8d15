"""The real-vocabulary pruning example's tables (evidence/llama_prune_report.py): built from planted records, its
rules (rate choice with the edge rule, n_δ, the deeper-half share, Welch + BH rows, spikes) checked by hand, and the
committed results.md equal to what its committed CSVs give."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evidence import llama_prune_plan as plan
from evidence import llama_prune_report as report

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "docs" / "results" / "llama-prune"


def _run(work: Path, variant: str, lr: float, seed: int, loss: float, train_loss=None) -> None:
    folder = work / "train" / plan.run_name(variant, lr, seed)
    folder.mkdir(parents=True)
    record = {"variant": variant, "lr": lr, "seed": seed, "steps": 30, "status": "finished",
              "validation_loss": loss, "train_loss": train_loss or [3.0] * 30, "wall_time_s": 60.0}
    (folder / "run.json").write_text(json.dumps(record))


def _curves(work: Path, variant: str, lr: float, seed: int, sets: dict[str, list[list[int]]], delta: float) -> None:
    folder = work / "prune" / plan.run_name(variant, lr, seed) / "curves" / "pruning_report"
    folder.mkdir(parents=True)
    curves = {}
    for criterion, chosen in sets.items():
        deltas = [delta * (n + 1) for n in range(len(chosen))]
        curves[criterion] = {"criterion": criterion, "scores": None, "sets": chosen,
                             "loss": [2.0 + d for d in deltas], "loss_interval": [[1.9 + d, 2.1 + d] for d in deltas],
                             "accuracy": [0.0] * len(chosen), "accuracy_interval": [[0.0, 0.0]] * len(chosen),
                             "delta_loss": deltas, "delta_loss_interval": [[d - 0.01, d + 0.01] for d in deltas]}
    (folder / "criteria.json").write_text(json.dumps({"clean_loss": 2.0, "clean_loss_interval": [1.9, 2.1],
                                                      "curves": curves}))


def _heal(work: Path, variant: str, lr: float, seed: int, criterion: str, n: int, mode: str, blocks: list[int],
          healed: float, control: float) -> None:
    folder = work / "prune" / plan.run_name(variant, lr, seed) / f"heal-{mode}-n{n}-{criterion}"
    folder.mkdir(parents=True)

    def loss(value):
        return {"loss": value, "loss_interval": [value - 0.1, value + 0.1]}

    surgery = {"removed_blocks": blocks, "heal_steps": plan.HEAL_STEPS, "perplexity": {"pruned": loss(3.0)},
               "perplexity_after_heal": loss(healed), "control_perplexity_after_heal": loss(control)}
    (folder / "config.json").write_text(json.dumps({"layerscale_surgery": surgery}))


def _planted(work: Path) -> None:
    # prenorm: best at 2e-3 (interior); layerscale: best at 8e-3 (an edge), extended to 1.6e-2, which is worse
    for lr, loss in zip(plan.GRID, (3.0, 2.5, 2.7, 2.9)):
        _run(work, "prenorm", lr, 0, loss)
    for lr, loss in zip(plan.GRID + (1.6e-2,), (3.0, 2.9, 2.8, 2.4, 2.6)):
        _run(work, "layerscale", lr, 0, loss)
    deep = [[15], [14, 15], [13, 14, 15], [12, 13, 14, 15]]
    shallow = [[0], [0, 1], [0, 1, 2], [0, 1, 2, 3]]
    for seed in plan.SEEDS:
        if seed:
            _run(work, "prenorm", 2e-3, seed, 2.5)
            _run(work, "layerscale", 8e-3, seed, 2.4)
        sets = {c: deep for c in plan.CRITERIA}
        _curves(work, "prenorm", 2e-3, seed, sets, 0.04 + 0.001 * seed)  # Δ(n) = 0.04 n: n_0.1 = 2
        _curves(work, "layerscale", 8e-3, seed, {**sets, "ablation": shallow, "gamma": deep}, 0.02 + 0.001 * seed)
        for mode in plan.HEAL_MODES:
            _heal(work, "prenorm", 2e-3, seed, "block_influence", 4, mode, deep[3], 2.2, 2.1)
            _heal(work, "layerscale", 8e-3, seed, "block_influence", 4, mode, deep[3], 2.15, 2.1)


@pytest.fixture
def planted(tmp_path):
    work, out = tmp_path / "work", tmp_path / "out"
    plan_max = plan.MAX_REMOVED
    _planted(work)
    out.mkdir()
    assert plan_max == 8  # the planted curves stop at n = 4: the tables cope with a short curve
    report.collect(work, out)
    return work, out


def test_rate_choice_and_the_edge_rule():
    runs = [{"variant": "layerscale", "lr": repr(lr), "seed": "0", "validation_loss": repr(loss)}
            for lr, loss in zip(plan.GRID, (3.0, 2.9, 2.8, 2.4))]
    assert report.chosen_rate(runs, "layerscale") is None  # best at the top edge: the extension must run first
    runs.append({"variant": "layerscale", "lr": "0.016", "seed": "0", "validation_loss": "2.6"})
    assert report.chosen_rate(runs, "layerscale") == 8e-3
    assert plan.extension(list(plan.GRID), 1e-3) == 5e-4 and plan.extension(list(plan.GRID), 2e-3) is None
    assert plan.extension(list(plan.GRID) + [1.6e-2, 3.2e-2], 3.2e-2) is None  # at most two extensions


def test_collect_writes_the_tables(planted):
    _, out = planted
    tables = report.load_tables(out)
    assert {r["variant"] for r in tables.runs} == {"prenorm", "layerscale"} and len(tables.runs) == 13
    assert report.chosen_rate(tables.runs, "prenorm") == 2e-3
    unpruned = [r for r in tables.pruning if r["criterion"] == "none"]
    assert len(unpruned) == 6 and all(r["n"] == "0" and r["loss"] == "2.0" for r in unpruned)
    # 1-based blocks in the table, from the 0-based sets of criteria.json
    row = next(r for r in tables.pruning if r["variant"] == "prenorm" and r["criterion"] == "gromov" and r["n"] == "4")
    assert row["blocks"] == "13 14 15 16"
    # the healed rows: every criterion that chose block_influence's blocks at n = 4 reads its healing, marked so
    healed = [r for r in tables.healing if r["variant"] == "prenorm" and r["mode"] == "full"]
    assert {r["criterion"] for r in healed} == set(plan.CRITERIA)
    assert {r["same_blocks_as"] for r in healed if r["criterion"] != "block_influence"} == {"block_influence"}


def test_n_delta_deep_share_and_the_layerscale_rows(planted):
    _, out = planted
    tables = report.load_tables(out)
    assert [report.blocks_within(tables, "prenorm", "gromov", s) for s in plan.SEEDS] == [2, 2, 2]
    assert report.blocks_within(tables, "layerscale", "gromov", 0) == 4  # 0.02 n <= 0.1 up to n = 4 here
    assert report.deep_share(tables, "prenorm", "gromov", 4) == (12, 12, 3, 14.5)
    assert report.deep_share(tables, "layerscale", "ablation", 4) == (0, 12, 0, 2.5)
    rows = {(r["criterion"], r["n"]): r for r in report.layerscale_rows(tables)}
    difference = rows[("gromov", 4)]["difference"]
    assert difference.mean == pytest.approx(0.08 - 0.16)  # (0.02 - 0.04) × 4, the seeds' offsets cancel
    assert difference.excludes(0.0) and rows[("gromov", 4)]["verdict"] == "LayerScale lower"
    text = (out / "results.md").read_text()
    assert "| layerscale | ablation | 0 of 12 | 2.5 | 0 of 3 |" in text
    # ShortGPT's quarter: Δ(4) = 0.16 > 0.1 for Pre-LN's seeds, 0.08–0.088 for LayerScale's
    assert "**prenorm, ShortGPT**" in text and text.count("short of its quarter: not every seed") == 1
    assert text.count("in line with its quarter: every seed") == 1


def test_healing_recovery_is_the_unhealed_change_minus_the_healed_gap(planted):
    _, out = planted
    tables = report.load_tables(out)
    unhealed, recovered = report.healing_recovery(tables, "prenorm", "block_influence", 4, "full")
    expected = [(0.04 + 0.001 * seed) * 4 for seed in plan.SEEDS]  # Δ(4) of each seed's planted curve
    assert unhealed == pytest.approx(expected)
    assert recovered == pytest.approx([d - (2.2 - 2.1) for d in expected])  # healed 2.2 against its control 2.1
    assert report.healing_recovery(tables, "prenorm", "gromov", 8, "lora") == ([], [])  # nothing healed there


def test_healing_of_other_blocks_than_the_curve_is_refused(tmp_path):
    work = tmp_path / "work"
    _planted(work)
    target = work / "prune" / plan.run_name("prenorm", 2e-3, 0) / "heal-full-n4-block_influence" / "config.json"
    raw = json.loads(target.read_text())
    raw["layerscale_surgery"]["removed_blocks"] = [0, 1, 2, 3]
    target.write_text(json.dumps(raw))
    with pytest.raises(ValueError, match="are not the curve's"):
        report.collect(work, tmp_path)


def test_a_planted_spike_is_counted():
    losses = [3.0] * 50 + [30.0] * 10 + [3.0] * 40
    assert report.spike_count(losses) == 1
    assert report.spike_count([3.0] * 100) == 0


def test_results_md_is_what_its_tables_give(tmp_path, planted):
    _, out = planted
    first = (out / "results.md").read_bytes()
    report.write_report(out)
    assert (out / "results.md").read_bytes() == first


@pytest.mark.skipif(not (COMMITTED / "runs.csv").is_file(), reason="the example's tables are not committed yet")
def test_the_committed_results_md_is_what_the_committed_tables_give(tmp_path):
    for name in ("runs.csv", "pruning.csv", "healing.csv", "results.md"):
        shutil.copyfile(COMMITTED / name, tmp_path / name)
    report.write_report(tmp_path)
    assert (tmp_path / "results.md").read_bytes() == (COMMITTED / "results.md").read_bytes()


def test_the_runner_reads_each_criterions_blocks_from_criteria_json(tmp_path):
    _curves(tmp_path, "prenorm", 2e-3, 0, {"gromov": [[3], [3, 4]], "ablation": [[0], [0, 7]]}, 0.01)
    curves = plan.read_curves(tmp_path / "prune" / plan.run_name("prenorm", 2e-3, 0) / "curves")
    assert curves == {"gromov": [[3], [3, 4]], "ablation": [[0], [0, 7]]}


def test_withdrawn_healing_rows_print_withdrawn_and_why_not_their_numbers(tmp_path, planted, monkeypatch):
    _, out = planted
    for name in ("runs.csv", "pruning.csv", "healing.csv"):
        shutil.copyfile(out / name, tmp_path / name)
    tables = report.load_tables(tmp_path)
    rows = [r for r in tables.healing if r["variant"] == "prenorm" and r["mode"] == "full"]
    assert rows
    monkeypatch.setattr(plan, "WITHDRAWN", {("prenorm", "full"): "a planted reason"})
    report.write_report(tmp_path)
    text = (tmp_path / "results.md").read_text()
    assert f"({len({(r['seed'], r['criterion'], r['n']) for r in rows})} of them withdrawn: see question 1)" in text
    assert text.startswith("# Pruning a real-vocabulary Llama\n\nStatus: in progress")
    question_one = text.split("How many blocks go before perplexity breaks", 1)[1]
    line = next(t for t in question_one.splitlines() if t.startswith("| prenorm | block_influence |"))
    cells = line.strip("|").split("|")
    full_4, lora_4, full_8, lora_8 = (c.strip() for c in cells[3:])
    assert full_4 == full_8 == "withdrawn" and "withdrawn" not in lora_4 + lora_8  # LoRA's rows stand
    assert "Withdrawn, prenorm healed with full: a planted reason." in text


def test_collect_keeps_the_recorded_variants_rows_and_takes_the_others_from_the_new_records(tmp_path, planted):
    _, out = planted
    before = report.load_tables(out)
    redo = tmp_path / "redo"  # the LayerScale variant alone, a new draw: other losses, another chosen rate
    for lr, loss in zip(plan.GRID, (3.0, 2.9, 2.2, 2.4)):
        _run(redo, "layerscale", lr, 0, loss)
    for seed in plan.SEEDS:
        if seed:
            _run(redo, "layerscale", 4e-3, seed, 2.3)
        _curves(redo, "layerscale", 4e-3, seed, {c: [[5], [5, 6]] for c in plan.criteria("layerscale")}, 0.07)
    report.collect(redo, out, ("prenorm",))
    after = report.load_tables(out)
    for table in ("runs", "pruning", "healing"):
        kept = [r for r in getattr(after, table) if r["variant"] == "prenorm"]
        assert kept and kept == [r for r in getattr(before, table) if r["variant"] == "prenorm"]
    assert report.chosen_rate(after.runs, "layerscale") == 4e-3
    assert len([r for r in after.runs if r["variant"] == "layerscale"]) == 6  # the 4 grid rows and seeds 1-2
    layerscale = [r for r in after.pruning if r["variant"] == "layerscale"]
    assert {r["lr"] for r in layerscale} == {"0.004"} and {r["blocks"] for r in layerscale if r["n"] == "1"} == {"6"}
    assert not [r for r in after.healing if r["variant"] == "layerscale"]  # none of the old healing rows survive
    assert [r["variant"] for r in after.pruning] == sorted((r["variant"] for r in after.pruning),
                                                           key=plan.VARIANTS.index)


def test_collect_refuses_unknown_or_absent_recorded_variants(tmp_path, planted):
    work, out = planted
    with pytest.raises(ValueError, match="recorded variants must be among"):
        report.collect(work, out, ("postnorm",))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="holds no rows of"):
        report.collect(work, empty, ("prenorm",))
