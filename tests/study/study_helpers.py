"""A tiny study on digits that finishes in seconds, and fake run folders: for the study tests."""

import json
from pathlib import Path

TINY_BASE = {
    "model": {"name": "vit", "patch_size": 4, "embed_dim": 16, "num_heads": 2, "mlp_ratio": 1.0},
    "data": {"name": "digits", "batch_size": 64, "augment": False},
    "optim": {"epochs": 1, "max_steps": 8, "lr": 1e-3, "warmup_steps": 1},
    "run": {"progress": "none", "checkpoint_every_steps": 2, "keep_checkpoints": 1, "eval_every_steps": 2},
    "diagnostics": {"enabled": False},
}


def write_fake_run(run_dir: Path, accuracies, losses, status="finished", diverged_step=None, time_s=10.0,
                   test_accuracy=None, step=None):
    """A run directory as a study run leaves it: metrics.jsonl (validation evaluations every 10 steps, then the
    test evaluation) and study_status.json."""
    run_dir.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"step": 10 * (i + 1), "split": "eval", "on": "validation", "accuracy": a, "loss": l,
                         "time": time_s}) for i, (a, l) in enumerate(zip(accuracies, losses))]
    if test_accuracy is not None:
        lines.append(json.dumps({"step": 10 * len(accuracies), "split": "test", "on": "test",
                                 "accuracy": test_accuracy, "loss": 1.0, "time": time_s}))
    (run_dir / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    (run_dir / "study_status.json").write_text(json.dumps(
        {"status": status, "step": step if step is not None else 10 * len(accuracies), "diverged_step": diverged_step,
         "message": ""}))


def live_processes(*names: str) -> list[int]:
    """PIDs of the live (not zombie) processes whose command line contains every one of ``names`` (read from
    ``/proc``)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and all(name in cmdline for name in names):
            pids.append(int(entry.name))
    return pids
