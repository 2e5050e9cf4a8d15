"""Size and look of a report's embedded figures: full-colour PNG against the 256-colour palette PNG (median cut)
that ``layerscale.diagnostics.html_parts.figure_png_bytes`` writes.

Run: python benchmarks/bench_report_figures.py [REPORT.html ...] [--rounds 5]

Each report given (default: every committed ``docs/results/*/report.html``) is read for its embedded full-colour
PNGs, which are what matplotlib renders; each is re-encoded as the palette PNG and the two are compared: bytes, and
how far the pixels moved (mean absolute difference per RGB channel, in levels of 255, and the share of pixels that
moved by more than 8 levels). Reports already written with palettes (PNG colour type 3) are skipped. Then the time
of one figure through matplotlib's ``savefig`` alone against ``figure_png_bytes`` (the same ``savefig`` then the
quantizer), interleaved, as a ratio.
"""

from __future__ import annotations

import argparse
import base64
import io
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from common import interleaved_medians, print_table  # noqa: E402

from layerscale.diagnostics.html_parts import figure_png_bytes, png_with_palette  # noqa: E402

_EMBEDDED = re.compile(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"')


def pixel_change(a: bytes, b: bytes) -> tuple[float, float]:
    """Mean absolute RGB difference (levels of 255) and the share of pixels with a channel moved by more than 8."""
    import numpy as np
    from PIL import Image

    x, y = (np.asarray(Image.open(io.BytesIO(p)).convert("RGB"), dtype=np.int16) for p in (a, b))
    diff = np.abs(x - y)
    return float(diff.mean()), float((diff.max(axis=2) > 8).mean())


def report_sizes(path: Path) -> None:
    pngs = [base64.b64decode(m) for m in _EMBEDDED.findall(path.read_text(encoding="utf-8"))]
    full = [p for p in pngs if p[25] != 3]  # byte 25: the IHDR colour type; 3 = palette
    if not full:
        print(f"{path}: {len(pngs)} figure(s), already palette PNGs: skipped")
        return
    sizes = [(len(p), len(q), *pixel_change(p, q)) for p, q in ((p, png_with_palette(p)) for p in full)]
    before, after = sum(s[0] for s in sizes), sum(s[1] for s in sizes)
    print(f"{path}: {len(full)} figures, full colour {before:,} bytes, palette {after:,} bytes, "
          f"ratio {after / before:.3f}; mean |ΔRGB| {max(s[2] for s in sizes):.3f} levels at most, pixels moved "
          f"> 8 levels {max(s[3] for s in sizes):.2%} at most")


def timing(rounds: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import numpy as np
    from matplotlib.figure import Figure

    rng = np.random.default_rng(0)
    fig = Figure(figsize=(9.8, 10.6))
    for k in range(8):
        ax = fig.add_subplot(4, 2, k + 1)
        for seed in range(5):
            ax.plot(np.cumsum(rng.normal(size=170)), lw=1.3)
    medians = interleaved_medians({"savefig": lambda: fig.savefig(io.BytesIO(), format="png", dpi=100),
                                   "figure_png_bytes": lambda: figure_png_bytes(fig, 100)}, rounds=rounds)
    print("one 980 x 1060 figure of 8 panels x 5 lines, dpi 100:")
    print_table(medians, "savefig")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", nargs="*", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    for path in args.reports or sorted((ROOT / "docs" / "results").glob("*/report.html")):
        report_sizes(path)
    timing(args.rounds)


if __name__ == "__main__":
    main()
