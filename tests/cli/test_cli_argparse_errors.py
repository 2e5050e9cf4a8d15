"""A value argparse refuses (a type check, a choice, a missing argument) is one line naming it, with a pointer to
``--help`` and exit status 2 — not the sub-command's whole usage block (28 lines for ``study``) above the error."""

import pytest

from layerscale.cli import main


@pytest.mark.parametrize(("argv", "names"), [
    (["study", "--start-window", "0"], ["--start-window", "'0'"]),
    (["demo", "--jobs", "abc"], ["--jobs", "'abc'"]),
    (["analyze", "--examples", "abc"], ["--examples", "'abc'"]),
    (["prune", "--remove", "abc"], ["--remove", "'abc'"]),
    (["grow", "--insert", "abc"], ["--insert", "'abc'"]),
    (["fold"], ["src, dst"]),
    (["report"], ["RUN_DIR"]),
    ([], ["COMMAND"]),
])
def test_argparse_errors_are_one_line_naming_the_value(argv, names, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "usage:" not in err, err
    command = " ".join(["layerscale", *argv[:1]])
    assert err.startswith(f"{command}: error: ") and err.rstrip().endswith(f"see {command} --help")
    for name in names:
        assert name in err


def test_an_option_repeated_by_its_own_message_is_named_once(capsys):
    with pytest.raises(SystemExit):
        main(["study", "--start-window", "0"])
    assert capsys.readouterr().err.count("--start-window") == 1  # not "argument --start-window: --start-window ..."
