"""``layerscale study --start-window``: after the window no run starts, the runs in progress end, the runs not
started stay pending, and the study is summarised as it stands (a session that ends at a known time loses no
half-trained run)."""

from __future__ import annotations

import json

import pytest
from study_helpers import TINY_BASE

import layerscale.study.run.executor as executor
from layerscale.cli import main
from layerscale.study.design.grid import RunSpec, StudySpec
from layerscale.study.study import run_study


class _Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class _Process:
    """A worker that writes its run's status and exits 0 at its (2 + 2 × seed)-th poll: the runs end one by one, so
    a slot frees while another run is still in progress."""

    def __init__(self, run):
        self.run, self.polls, self.returncode = run, 0, None

    def poll(self):
        self.polls += 1
        if self.polls < 2 + 2 * self.run.seed:
            return None
        self.run.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run.run_dir / "study_status.json").write_text(json.dumps({"status": "finished", "step": 8}))
        self.returncode = 0
        return 0

    def terminate(self):
        raise AssertionError("a run in progress was terminated")


class _Log:
    def close(self):
        pass


def _runs(tmp_path, n):
    return [RunSpec("prenorm", 1, 1e-3, seed, "final", {"run": {"out_dir": str(tmp_path / "runs" / f"s{seed}")}})
            for seed in range(n)]


@pytest.fixture
def clock(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(executor.time, "monotonic", clock)
    monkeypatch.setattr(executor.time, "sleep", lambda seconds: None)
    return clock


def test_runs_started_before_the_window_closes_end_and_the_rest_stay_pending(tmp_path, clock, monkeypatch):
    started = []

    def start(run, study_dir, threads):
        started.append(run.seed)
        clock.now += 60  # each start takes a minute of the window
        return _Process(run), run, _Log()

    monkeypatch.setattr(executor, "_start", start)
    lines = []
    runs = _runs(tmp_path, 5)
    failures = executor.run_pool(runs, tmp_path, jobs=2, threads=1, progress=False, log=lines.append,
                                 start_by=clock.now + 90)
    assert failures == []
    assert started == [0, 1]  # the second start still fell inside the window, the third did not
    assert [executor.is_done(r) for r in runs] == [True, True, False, False, False]
    assert lines[-1] == ("study: the start window closed; 3 run(s) not started (they stay pending: run the same "
                         "command again to continue)")
    # the next invocation, with a new window, takes up exactly the runs left
    started.clear()
    executor.run_pool(runs, tmp_path, jobs=2, threads=1, progress=False, log=lines.append, start_by=None)
    assert started == [2, 3, 4] and all(executor.is_done(r) for r in runs)


def test_a_closed_window_starts_nothing(tmp_path, clock, monkeypatch):
    monkeypatch.setattr(executor, "_start", lambda *a: pytest.fail("a run started after its window"))
    lines = []
    assert executor.run_pool(_runs(tmp_path, 2), tmp_path, jobs=1, threads=1, progress=False, log=lines.append,
                             start_by=clock.now) == []
    assert "2 run(s) not started" in lines[-1]


def test_a_study_past_its_window_is_summarised_as_it_stands(tmp_path, clock, monkeypatch):
    monkeypatch.setattr(executor, "_start", lambda *a: pytest.fail("a run started after its window"))
    spec = StudySpec(("prenorm", "layerscale"), (1,), (0, 1, 2), json.loads(json.dumps(TINY_BASE)), lrs=(1e-3,))
    monkeypatch.setattr("layerscale.study.study.time.monotonic", clock)

    def close_the_window(*args, **kwargs):  # the window closes while the study is being planned
        clock.now += 10
        return real_make_pool(*args, **kwargs)

    import layerscale.study.study as study_module

    real_make_pool = study_module.make_pool
    monkeypatch.setattr(study_module, "make_pool", close_the_window)
    summary = run_study(spec, tmp_path / "s", jobs=1, report=False, progress=False, start_window=5.0,
                        log=lambda line: None)
    assert summary.failures == []
    assert {r.status for r in summary.results} == {"pending"}  # nothing trained, every run still pending
    assert "not finished yet" in summary.markdown
    assert (tmp_path / "s" / "results.csv").is_file()


@pytest.mark.parametrize("window, message", [
    ("0", "argument --start-window: must be at least one minute, got '0'"),
    ("soon", "argument --start-window: 'soon' is not a Slurm time limit"),
])
def test_a_bad_window_is_one_line_and_exit_2(tmp_path, capsys, window, message):
    with pytest.raises(SystemExit) as exit_info:
        main(["study", "--out", str(tmp_path / "s"), "--start-window", window])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and message in err
    assert not (tmp_path / "s").exists()


def test_a_window_is_refused_for_an_engine_that_submits_every_run_at_once(tmp_path):
    from layerscale.study.run.executors import ExecutorOptions, make_pool

    with pytest.raises(ValueError, match="--start-window applies to the local executor"):
        make_pool(ExecutorOptions(engine="ray"), tmp_path, jobs=1, threads=1, start_by=1.0)
