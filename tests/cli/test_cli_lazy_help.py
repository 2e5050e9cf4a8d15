"""``layerscale --help`` builds no sub-command (and imports no torch); a chosen sub-command still gets its full
parser. The time it takes is measured in benchmarks/README.md, not here."""

import subprocess
import sys

import pytest

from layerscale.cli import COMMANDS, chosen_command, main

PROBE = """
import sys
from layerscale.cli import main
try:
    main({argv!r})
except SystemExit:
    pass
print("torch imported:", "torch" in sys.modules, file=sys.stderr)
"""


def _probe(argv):
    return subprocess.run([sys.executable, "-c", PROBE.format(argv=argv)], capture_output=True, text=True,
                          timeout=120)


def test_top_level_help_lists_every_command_without_importing_torch():
    done = _probe(["--help"])
    assert "torch imported: False" in done.stderr, done.stderr
    for name, (_, help_text) in COMMANDS.items():
        assert name in done.stdout and help_text.split()[0] in done.stdout


def test_importing_the_package_imports_no_torch_but_names_still_resolve():
    code = ("import sys, layerscale; assert 'torch' not in sys.modules; "
            "from layerscale import create_model, LayerScale, param_groups; "
            "assert 'torch' in sys.modules and callable(create_model); print(layerscale.train.run.__name__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "run", done.stderr


def test_chosen_command_is_the_first_positional_argument():
    assert chosen_command(["--version"]) is None
    assert chosen_command(["train", "--config", "x.yaml"]) == "train"
    assert chosen_command(["trian"]) is None


def test_a_chosen_command_gets_its_full_parser(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--help"])
    assert exit_info.value.code == 0
    assert "--print-config" in capsys.readouterr().out
    assert main(["models"]) == 0
    assert "residual methods:" in capsys.readouterr().out


def test_an_unknown_command_is_exit_status_2_with_a_suggestion(capsys):
    assert main(["trian"]) == 2
    assert "unknown command 'trian' (did you mean train?)" in capsys.readouterr().err
