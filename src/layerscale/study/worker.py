"""One study run in its own process: ``python -m layerscale.study.worker RUN_DIR CONFIG_JSON THREADS``.

Starts the run, or resumes it from its latest checkpoint, and writes ``study_status.json`` in the run directory:
``{"status": "finished" | "diverged", "diverged_step": int | null, "message": str}``. The worker stops itself when
its parent (the ``layerscale study`` process) dies, so that a killed study leaves no orphan training behind and a
resumed study never trains the same run twice at once.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

from ..atomic_io import write_json_atomic

STATUS_FILE = "study_status.json"


def main(argv: list[str]) -> int:
    import torch

    from ..train.callbacks import Callback
    from ..train.checkpoint import latest_checkpoint
    from ..train.nonfinite import NonFiniteError
    from ..train.runner import run

    run_dir, config_path, threads = Path(argv[0]), Path(argv[1]), int(argv[2])
    torch.set_num_threads(threads)
    parent = os.getppid()

    class StopWithParent(Callback):
        def on_step_end(self, trainer, step):
            if os.getppid() != parent:
                raise SystemExit(f"study process {parent} is gone; stopping {run_dir.name} at step {step}")

    config = json.loads(config_path.read_text(encoding="utf-8"))
    resume = run_dir.is_dir() and latest_checkpoint(run_dir) is not None
    if run_dir.exists() and not resume:
        shutil.rmtree(run_dir)  # a start that never reached its first checkpoint: nothing worth keeping
    try:
        if resume:
            run(resume=run_dir, callbacks=[StopWithParent()])
        else:
            run(config, callbacks=[StopWithParent()])
    except NonFiniteError as exc:
        match = re.search(r"step (\d+)", str(exc))
        write_json_atomic(run_dir / STATUS_FILE, {"status": "diverged", "diverged_step": int(match.group(1)) if match else None,
                                "message": str(exc)})
        return 0
    write_json_atomic(run_dir / STATUS_FILE, {"status": "finished", "diverged_step": None, "message": ""})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
