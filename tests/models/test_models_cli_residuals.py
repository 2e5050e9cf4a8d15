"""``layerscale models`` lists every residual method, the frontier ones included."""

from layerscale.cli import main


def test_models_command_lists_the_frontier_residual_methods(capsys):
    assert main(["models"]) == 0
    line = [row for row in capsys.readouterr().out.splitlines() if row.startswith("residual methods:")]
    assert len(line) == 1
    names = line[0].split(":", 1)[1].replace(" ", "").split(",")
    assert {"hc", "hc_static", "mhc", "normformer", "admin", "prenorm", "layerscale"} <= set(names)
