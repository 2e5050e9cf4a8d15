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


def test_a_mistyped_option_is_one_line_with_the_closest_option():
    done = subprocess.run([sys.executable, "-m", "layerscale", "train", "--outt", "x"], capture_output=True,
                          text=True)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "layerscale train: error: unknown option --outt (did you mean --out?); see layerscale " \
                          "train --help\n"


def test_an_unknown_option_without_a_close_one_and_a_stray_value(capsys):
    assert main(["train", "--zzzzzz=3"]) == 2
    assert capsys.readouterr().err == "layerscale train: error: unknown option --zzzzzz; see layerscale train " \
                                      "--help\n"
    assert main(["train", "--config", "vit_digits", "stray\nline"]) == 2
    assert capsys.readouterr().err == "layerscale train: error: unexpected argument 'stray\\nline'; see " \
                                      "layerscale train --help\n"
