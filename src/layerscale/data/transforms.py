"""Plain-torch augmentations for (C, H, W) float images, applied per sample in training only.

Randomness: each transform draws from `generator` when one is given, otherwise from the global torch
RNG. The global RNG is the default because it is what makes resume exact: in the main process
(`num_workers=0`) a trainer that saves and restores `torch.get_rng_state()` replays the same crops and
flips; with worker processes, DataLoader seeds each worker's global RNG from the loader's own seeded
generator (see `make_loader`), so the run is reproducible from that seed. Pass an explicit generator
only with `num_workers=0`: each worker would get a copy of it and repeat the same draws.
Every call consumes a fixed number of draws (two for a crop, one for a flip) whatever the outcome,
so the RNG stream never depends on the image.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from ..messages import shown_value


def check_padding(padding: object) -> int:
    """``padding`` as an ``int`` >= 0; a one-line ``ValueError`` naming it otherwise (a bool, a float, a negative
    number: a negative padding would silently mean no crop)."""
    if isinstance(padding, bool) or not isinstance(padding, numbers.Integral) or padding < 0:
        raise ValueError(f"padding must be an integer >= 0, got {shown_value(padding)}")
    return int(padding)


class RandomCropPad:
    """Zero-pad `padding` pixels on every side, then crop a window of the original (H, W) at a random
    offset in `[0, 2 * padding]` on each axis. Output shape equals input shape."""

    def __init__(self, padding: int, generator: torch.Generator | None = None) -> None:
        self.padding = check_padding(padding)
        self.generator = generator

    def __call__(self, img: torch.Tensor) -> torch.Tensor:
        p = self.padding
        if p == 0:
            return img
        h, w = img.shape[-2:]
        top, left = torch.randint(0, 2 * p + 1, (2,), generator=self.generator).tolist()
        return F.pad(img, (p, p, p, p))[..., top : top + h, left : left + w]

    def __repr__(self) -> str:
        return f"RandomCropPad(padding={self.padding})"


class RandomHorizontalFlip:
    """Mirror the last (width) axis with probability `p`."""

    def __init__(self, p: float = 0.5, generator: torch.Generator | None = None) -> None:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"p must be in [0, 1], got {p}")
        self.p = p
        self.generator = generator

    def __call__(self, img: torch.Tensor) -> torch.Tensor:
        if torch.rand((), generator=self.generator).item() < self.p:
            return img.flip(-1)
        return img

    def __repr__(self) -> str:
        return f"RandomHorizontalFlip(p={self.p})"


class Compose:
    """Apply `transforms` in order."""

    def __init__(self, transforms: Sequence[Callable[[torch.Tensor], torch.Tensor]]) -> None:
        self.transforms = list(transforms)

    def __call__(self, img: torch.Tensor) -> torch.Tensor:
        for t in self.transforms:
            img = t(img)
        return img

    def __repr__(self) -> str:
        return f"Compose({self.transforms!r})"


def train_augmentation(
    padding: int, hflip: bool, generator: torch.Generator | None = None
) -> Compose | None:
    """The training augmentation: random crop with `padding` (skipped when 0), then a horizontal flip
    when `hflip`. Returns None when there is nothing to do. A padding that is not an integer >= 0 is refused."""
    padding = check_padding(padding)
    steps: list[Callable[[torch.Tensor], torch.Tensor]] = []
    if padding > 0:
        steps.append(RandomCropPad(padding, generator))
    if hflip:
        steps.append(RandomHorizontalFlip(0.5, generator))
    return Compose(steps) if steps else None
