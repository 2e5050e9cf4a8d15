#!/usr/bin/env python3
"""Write the confirmatory study's report (evidence.confirm_report) into docs/results/confirm/: results.csv,
stability.csv, spikes.csv, cpu_runs.csv, cpu_sensitivity.csv and results.md (evidence.confirm_sections prints it
from those CSVs, as scripts/results_page.py prints docs/RESULTS.md's ``confirm`` block). Refuses (exit 2, one
line) until every run of both folders has ended.

    python scripts/confirm_report.py
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))  # this checkout's code, whatever is installed
sys.path.insert(0, str(ROOT))  # the evidence pipelines (evidence/, not part of the installed package)

from evidence.confirm_report import write_report  # noqa: E402


def main() -> int:
    try:
        paths = write_report(ROOT / "docs" / "results" / "confirm", ROOT / "docs" / "results")
    except ValueError as exc:
        print(f"confirm_report: {exc}", file=sys.stderr)
        return 2
    for path in paths.values():
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
