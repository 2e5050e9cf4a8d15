"""Write the confirmatory study's two design files (docs/results/confirm/{fashion,depthbench}/study.json) from the
redone studies they confirm: the same base config, shapes, validation split and early stopping, each primary
cell at the rate its redo chose (tuning.json ``chosen_lr``), seeds 5-14 (never used by any earlier run), the redo's
primary family. Run once, before the first run (docs/results/confirm/DESIGN.md); rerunning it rewrites the same
bytes (checked by ``--check``).

    python scripts/confirm_design.py            # write
    python scripts/confirm_design.py --check    # exit 1 if the committed files differ from what it would write
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results"
SEEDS = list(range(5, 15))
#: confirmed study -> (redo folder, depths whose cells the primary family compares)
CONFIRMED = {"fashion": ("fashion-grid", [48]), "depthbench": ("depthbench-grid", [4, 32])}


def design(redo: str, depths: list[int]) -> dict:
    saved = json.loads((RESULTS / redo / "study.json").read_text(encoding="utf-8"))
    chosen = {(c["method"], c["depth"]): c["chosen_lr"]
              for c in json.loads((RESULTS / redo / "tuning.json").read_text(encoding="utf-8"))["cells"]}
    methods = saved["methods"]
    cells = [(m, d) for d in depths for m in methods]
    if any(chosen.get(cell) is None for cell in cells):
        raise SystemExit(f"{redo}: a confirmed cell has no chosen rate")
    return {
        "methods": methods, "depths": depths, "seeds": SEEDS, "lrs": [], "reference": saved["reference"],
        "validation_fraction": saved["validation_fraction"], "tune_seed": saved["tune_seed"],
        "min_budget": saved["min_budget"], "halving_rate": saved["halving_rate"], "patience": saved["patience"],
        "min_delta": saved["min_delta"], "target": saved["target"], "shared_table": False,
        "shapes": [row for row in saved["shapes"] if row[1] in depths], "tuning": "fixed",
        "tune_seeds": saved["tune_seeds"], "extend_grid": 0, "primary": saved["primary"],
        "bootstrap": saved["bootstrap"], "primary_seeds": 0, "primary_declared": True,
        "fixed_rates": [[m, d, chosen[(m, d)]] for m, d in cells], "base": saved["base"],
        "executor": saved["executor"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed files instead of writing")
    args = parser.parse_args(argv)
    differing = []
    for name, (redo, depths) in CONFIRMED.items():
        path = RESULTS / "confirm" / name / "study.json"
        text = json.dumps(design(redo, depths), indent=2) + "\n"
        if args.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                differing.append(str(path))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    if differing:
        print("differs from the redo it confirms: " + ", ".join(differing), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
