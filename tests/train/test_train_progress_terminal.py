"""``run.progress: auto`` shows a bar only on a terminal with a width; a 0 x 0 terminal gets log lines."""

import os
import sys

import pytest

from layerscale.train.loop.progress import Progress

pytest.importorskip("tqdm")


class _FakeTerminal:
    def isatty(self):
        return True

    def fileno(self):
        return 2

    def write(self, text):
        return len(text)

    def flush(self):
        pass


@pytest.mark.parametrize("columns, mode", [(0, "log"), (80, "bar")])
def test_auto_progress_on_a_terminal_of_size(monkeypatch, capsys, columns, mode):
    monkeypatch.setattr(sys, "stderr", _FakeTerminal())
    monkeypatch.setattr(os, "get_terminal_size", lambda fd=None: os.terminal_size((columns, columns // 4)))
    progress = Progress(10, 0, "auto", active=True)
    try:
        assert progress.mode == mode
        progress.update(4, {"loss": 1.0}, log_line=True)
    finally:
        progress.close()
    printed = capsys.readouterr().out
    assert ("step 4/10  loss 1.0000" in printed) == (mode == "log")
