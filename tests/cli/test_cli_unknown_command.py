"""A mistyped sub-command gets the closest command names and exit status 2 (item 8 of issue 28)."""

import subprocess
import sys

from layerscale.cli import main


def test_a_mistyped_command_suggests_the_right_one(capsys):
    assert main(["trian", "--config", "vit_digits"]) == 2
    err = capsys.readouterr().err
    assert "unknown command 'trian' (did you mean train?)" in err
    assert "commands: demo, models, train" in err


def test_an_unknown_command_with_no_close_match_lists_the_commands(capsys):
    assert main(["zzzz"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("layerscale: error: unknown command 'zzzz'; commands: ") and "did you mean" not in err


def test_the_installed_command_suggests_too():
    done = subprocess.run([sys.executable, "-m", "layerscale", "reprot"], capture_output=True, text=True)
    assert done.returncode == 2
    assert "did you mean report?" in done.stderr
