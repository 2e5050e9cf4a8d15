"""Reading a study's results.csv back (layerscale.study.report.results_table): a row's comparison label in the
form ``--primary`` declares, and its per-seed test values, from rows as results_rows writes them."""

import csv

from layerscale.study.report.results_table import read_results
from layerscale.study.report.verdicts import primary_key


def test_a_rows_comparison_label_and_per_seed_values_round_trip(tmp_path):
    path = tmp_path / "results.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["table", "method", "depth_from", "depth", "test_per_seed"])
        writer.writeheader()
        writer.writerow({"table": "tuned", "method": "hc", "depth": 32, "test_per_seed": "5:86.25;6:85.5;14:-0.0"})
        writer.writerow({"table": "interaction", "method": "hc", "depth_from": 4, "depth": 32})
    cell, interaction = read_results(path)
    assert cell.comparison == "hc@32" and primary_key(cell.comparison) == ("diff", "hc", None, 32)
    assert interaction.comparison == "hc@4:32" and primary_key(interaction.comparison)[1:] == ("hc", 4, 32)
    assert cell.test_by_seed() == {5: 86.25, 6: 85.5, 14: -0.0} and interaction.test_by_seed() == {}
