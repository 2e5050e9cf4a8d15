"""``python -m layerscale.train.launch``: ``torchrun`` whose exit status is the workers' own.

``torchrun`` exits with status 1 and prints its ``ChildFailedError`` traceback whenever a worker fails, so the
caller of ``torchrun -m layerscale train`` cannot tell a bad input (status 2) from a non-finite stop (status 3) from
a crash. This wrapper takes exactly ``torchrun``'s arguments, runs the same launcher
(``torch.distributed.run.run``), and on failure exits with the status of the first worker that failed (the root
cause ``torchrun`` reports; a worker killed by a signal gives 128 + the signal number, as a shell does), after the
workers' own one-line message — rank 0 prints it, see :mod:`layerscale.train.cli`::

    python -m layerscale.train.launch --standalone --nproc_per_node=2 -m layerscale train --config FILE.yaml
"""

from __future__ import annotations

import logging
import sys

__all__ = ["main"]


def _quiet_agent_logs() -> None:
    """Silence the elastic agent's own log lines (each failure, each SIGTERM it sends to the other workers): the
    failing worker has already printed what went wrong. Its modules give their loggers explicit levels when
    imported, so every one of them is set, not only the parent."""
    for name in ["torch.distributed.elastic", *logging.Logger.manager.loggerDict]:
        if name.startswith("torch.distributed.elastic"):
            logging.getLogger(name).setLevel(logging.CRITICAL)


def main(argv: list[str] | None = None) -> int:
    """Run ``torchrun`` with ``argv``; return 0, or the exit status of the first worker that failed."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    _quiet_agent_logs()
    try:
        run(parse_args(sys.argv[1:] if argv is None else argv))
    except ChildFailedError as exc:
        _, failure = exc.get_first_failure()
        code = failure.exitcode
        return code if code > 0 else 128 - code if code < 0 else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
