"""The fixed plan of the real-vocabulary pruning example (docs/results/llama-prune/DESIGN.md): the rate grid and its
edge rule, the seeds, the criteria per variant, the healing settings, and the reader of a prune call's criteria
table. Constants here are the design's; changing one is a dated addendum there first."""

from __future__ import annotations

import json
from pathlib import Path

VARIANTS = ("prenorm", "layerscale")
#: layers of the trained Llama (evidence/llama_prune_train.py builds it)
DEPTH = 16
GRID = (1e-3, 2e-3, 4e-3, 8e-3)
#: the grid grows by this factor past an edge holding the best rate, at most MAX_EXTENSIONS times
EXTENSION_FACTOR = 2.0
MAX_EXTENSIONS = 2
STEPS = 1500
SEEDS = (0, 1, 2)
CRITERIA = ("block_influence", "gromov", "angular", "ablation")
MAX_REMOVED = 8
HEALED_N = (4, 8)
HEAL_MODES = ("full", "lora")
HEAL_STEPS = 100
HEAL_BATCH = 8
HEAL_LR = {"full": 1e-4, "lora": 1e-3}
LORA_RANK = 8
PRUNE_SEQ_LEN = 64
SAMPLES = 128
BOOTSTRAP = 1000
#: the loss rise (nats) that counts as "perplexity broke" for question 1
DELTA = 0.1
#: (variant, healing mode) whose healed rows are withdrawn, with why: the report prints "withdrawn" in their place.
#: Empty since the LayerScale variant was redone with the fixed LoRA merge (DESIGN.md, addenda of 2026-12-06 10:40,
#: 12:35 and 13:38 UTC; the withdrawn rows are kept in docs/results/llama-prune/superseded/healing.csv)
WITHDRAWN: dict[tuple[str, str], str] = {}


def run_name(variant: str, lr: float, seed: int) -> str:
    return f"{variant}-lr{lr:g}-s{seed}"


def criteria(variant: str) -> tuple[str, ...]:
    """The plain Llama has no γ, so ``gamma`` ranks the LayerScale models only."""
    return CRITERIA + (("gamma",) if variant == "layerscale" else ())


def choose(losses: dict[float, float]) -> float:
    """The rate of lowest validation loss (a non-finite loss never wins; the lower rate on an exact tie)."""
    finite = {lr: loss for lr, loss in losses.items() if loss == loss and abs(loss) != float("inf")}
    if not finite:
        raise ValueError(f"every rate diverged: {sorted(losses)}")
    return min(sorted(finite), key=lambda lr: finite[lr])


def extension(rates: list[float], choice: float) -> float | None:
    """The rate to add when ``choice`` is at an edge of ``rates`` and fewer than MAX_EXTENSIONS were added; else None."""
    added = len(rates) - len(GRID)
    if added >= MAX_EXTENSIONS:
        return None
    if choice == max(rates):
        return choice * EXTENSION_FACTOR
    if choice == min(rates):
        return choice / EXTENSION_FACTOR
    return None


def heal_arguments(mode: str) -> list[str]:
    arguments = ["--heal", mode, "--heal-steps", str(HEAL_STEPS), "--heal-batch-size", str(HEAL_BATCH),
                 "--heal-lr", f"{HEAL_LR[mode]:g}"]
    return arguments + (["--lora-rank", str(LORA_RANK)] if mode == "lora" else [])


def read_curves(dest: Path) -> dict[str, list[list[int]]]:
    """Each criterion's removed blocks (0-based) for n = 1 … N, from the ``criteria.json`` a prune call wrote."""
    raw = json.loads((dest / "pruning_report" / "criteria.json").read_text(encoding="utf-8"))
    return {name: [list(blocks) for blocks in curve["sets"]] for name, curve in raw["curves"].items()}
