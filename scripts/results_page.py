#!/usr/bin/env python
"""Regenerate the numbers of docs/RESULTS.md from docs/results/<study>/results.csv (evidence.results_page).

    python scripts/results_page.py            # rewrite the page's generated blocks
    python scripts/results_page.py --check    # exit 1 if the page is not what the tables give
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # this checkout's code, whatever is installed
sys.path.insert(0, str(ROOT))  # the evidence pipelines (evidence/, not part of the installed package)

from evidence.results_page import main  # noqa: E402

if __name__ == "__main__":
    args = sys.argv[1:]
    if not [a for a in args if not a.startswith("--")]:
        args.append(str(ROOT / "docs" / "RESULTS.md"))
    sys.exit(main(args))
