import pytest
import torch

from layerscale.data import RandomCropPad, RandomHorizontalFlip, train_augmentation


def _image(c=3, h=8, w=8):
    return torch.arange(1, c * h * w + 1, dtype=torch.float32).view(c, h, w)


def _run(transform, n=20):
    img = _image()
    return [transform(img) for _ in range(n)]


def test_same_generator_seed_same_output_different_seed_differs():
    make = lambda seed: train_augmentation(2, True, torch.Generator().manual_seed(seed))  # noqa: E731
    a, b, c = _run(make(0)), _run(make(0)), _run(make(1))
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert any(not torch.equal(x, y) for x, y in zip(a, c))


def test_global_rng_is_used_without_generator_and_restoring_state_replays():
    transform = train_augmentation(2, True)
    torch.manual_seed(0)
    _run(transform, 5)
    state = torch.get_rng_state()  # as a trainer saves it in a checkpoint
    after = _run(transform)
    torch.set_rng_state(state)
    assert all(torch.equal(x, y) for x, y in zip(after, _run(transform)))


def test_crop_keeps_shape_and_is_a_shifted_window():
    p = 2
    img = _image()
    padded = torch.nn.functional.pad(img, (p, p, p, p))
    seen = set()
    for out in _run(RandomCropPad(p, torch.Generator().manual_seed(0)), 60):
        assert out.shape == img.shape
        matches = [(t, l) for t in range(2 * p + 1) for l in range(2 * p + 1) if torch.equal(out, padded[:, t : t + 8, l : l + 8])]
        assert matches
        seen.add(matches[0])
    assert len(seen) > 10  # offsets really vary, over the whole (2p+1)^2 range
    assert RandomCropPad(0)(img) is img


def test_flip_probability_extremes():
    img = _image()
    assert torch.equal(RandomHorizontalFlip(1.0)(img), img.flip(-1))
    assert torch.equal(RandomHorizontalFlip(0.0)(img), img)
    flips = [torch.equal(o, img.flip(-1)) for o in _run(RandomHorizontalFlip(0.5, torch.Generator().manual_seed(0)), 200)]
    assert 60 < sum(flips) < 140


def test_draws_per_call_do_not_depend_on_outcome():
    # Fixed consumption keeps the RNG stream aligned whatever happened before (e.g. after resume).
    for transform_cls, arg in ((RandomCropPad, 3), (RandomHorizontalFlip, 0.5)):
        g1, g2 = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)
        transform_cls(arg, g1)(_image(1, 4, 4))
        transform_cls(arg, g2)(_image(3, 16, 16))
        assert torch.equal(g1.get_state(), g2.get_state())


def test_invalid_arguments():
    with pytest.raises(ValueError, match="padding"):
        RandomCropPad(-1)
    with pytest.raises(ValueError, match="p must be"):
        RandomHorizontalFlip(1.5)
    assert train_augmentation(0, False) is None
