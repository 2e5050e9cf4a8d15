"""Pieces every self-contained HTML report shares (``layerscale report``, ``layerscale analyze``): the style
sheet and a matplotlib figure as PNG bytes to embed."""

from __future__ import annotations

import io

__all__ = ["REPORT_CSS", "figure_png_bytes", "png_with_palette"]

#: The style sheet of every HTML report (runs, analysis): one look.
REPORT_CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto; max-width: 1240px;
       padding: 0 1em; color: #222; line-height: 1.45; }
h1 { font-size: 1.7em; margin-bottom: 0.2em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ddd; }
.meta { color: #666; font-size: 0.9em; }
table { border-collapse: collapse; font-size: 0.9em; margin: 0.8em 0; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: left; } th { background: #f3f3f3; }
img { max-width: 100%; height: auto; display: block; margin: 0.6em 0; border: 1px solid #eee; }
.notes li { color: #8a5300; }
"""


def figure_png_bytes(figure, dpi: int) -> bytes:
    """``figure`` (a matplotlib ``Figure``) rendered as PNG at ``dpi`` dots per inch, in memory, with a palette of
    at most 256 colours chosen by median cut (Pillow, which matplotlib already depends on); a figure with any
    transparent pixel keeps its full-colour PNG.

    A plot of a few line colours on white, with anti-aliased edges, needs no more: the palette PNG of a study
    report's figures is about a third of the full-colour one and its pixels move by 0.1 of 255 levels on average
    (benchmarks/README.md, "Report figures"), which keeps a committed study's report.html light."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    return png_with_palette(buffer.getvalue())


def png_with_palette(png: bytes) -> bytes:
    """The PNG ``png`` re-encoded with a median-cut palette of at most 256 colours; unchanged when any of its pixels
    is transparent (the palette here is of opaque colours)."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        if image.mode == "RGBA" and image.getchannel("A").getextrema()[0] < 255:
            return png
        palette = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    out = io.BytesIO()
    palette.save(out, format="PNG", optimize=True)
    return out.getvalue()
