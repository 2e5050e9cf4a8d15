"""``figure_png_bytes``: an opaque figure becomes a palette PNG that looks like matplotlib's full-colour rendering
and is smaller; a figure with transparent pixels keeps its full-colour PNG."""

from __future__ import annotations

import io

import pytest

from layerscale.diagnostics.html_parts import figure_png_bytes

pytest.importorskip("matplotlib")


def _figure(transparent: bool = False):
    import numpy as np
    from matplotlib.figure import Figure

    rng = np.random.default_rng(0)
    fig = Figure(figsize=(6, 4))
    ax = fig.add_subplot()
    for _ in range(6):
        ax.plot(np.cumsum(rng.normal(size=200)), lw=1.3)
    ax.set_title("six random walks")
    if transparent:
        fig.patch.set_alpha(0.0)
    return fig


def _pixels(png: bytes):
    import numpy as np
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        return image.mode, np.asarray(image.convert("RGBA"), dtype=np.int16)


def test_an_opaque_figure_is_a_smaller_palette_png_that_looks_the_same():
    fig = _figure()
    full = io.BytesIO()
    fig.savefig(full, format="png", dpi=100)
    png = figure_png_bytes(fig, 100)
    (mode, pixels), (_, reference) = _pixels(png), _pixels(full.getvalue())
    assert mode == "P" and pixels.shape == reference.shape == (400, 600, 4)
    assert len(png) < 0.7 * len(full.getvalue())
    difference = abs(pixels - reference)[..., :3]
    assert difference.mean() < 1.0 and (difference.max(axis=2) > 16).mean() < 0.02


def test_a_figure_with_transparent_pixels_keeps_full_colour():
    fig = _figure(transparent=True)
    png = figure_png_bytes(fig, 100)
    mode, pixels = _pixels(png)
    assert mode == "RGBA" and pixels[..., 3].min() == 0
