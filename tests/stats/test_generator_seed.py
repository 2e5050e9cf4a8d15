"""The one seed check of every function that seeds a torch generator (bootstrap, loader, split)."""

import numpy as np
import pytest
import torch

from layerscale.data.loader import make_loader
from layerscale.data.split import stratified_split
from layerscale.generator_seed import GENERATOR_SEED_RANGE, check_generator_seed
from layerscale.stats.bootstrap import bootstrap_weights


@pytest.mark.parametrize("seed", [GENERATOR_SEED_RANGE[0], -1, 0, 7, GENERATOR_SEED_RANGE[1], np.int64(3),
                                  np.uint64(2**64 - 1)])
def test_every_seed_torch_takes_is_taken_as_an_int(seed):
    taken = check_generator_seed(seed)
    assert type(taken) is int and taken == int(seed)
    torch.Generator().manual_seed(taken)  # the range is torch's own


@pytest.mark.parametrize("seed", [GENERATOR_SEED_RANGE[0] - 1, GENERATOR_SEED_RANGE[1] + 1, True, 1.0, "0", None,
                                  np.float64(2.0)])
def test_a_seed_torch_does_not_take_is_one_line_naming_it(seed):
    with pytest.raises(ValueError) as exc:
        check_generator_seed(seed, "--seed")
    message = str(exc.value)
    assert "\n" not in message and message.startswith("--seed must be an integer in [")
    assert repr(seed)[:20] in message or str(seed)[:20] in message


def test_the_three_seeded_functions_share_the_check():
    labels = torch.tensor([0, 1, 0, 1])
    dataset = torch.utils.data.TensorDataset(torch.zeros(4, 1), labels)
    too_big = 2**64
    for call in (lambda: bootstrap_weights(5, 3, seed=too_big), lambda: stratified_split(labels, 0.5, too_big),
                 lambda: make_loader(dataset, 2, shuffle=True, seed=too_big)):
        with pytest.raises(ValueError, match=r"^seed must be an integer in \["):
            call()
    # a NumPy integer seeds the loader's generator as the same int does
    first = [batch[1].tolist() for batch in make_loader(dataset, 2, shuffle=True, seed=np.int64(5))]
    again = [batch[1].tolist() for batch in make_loader(dataset, 2, shuffle=True, seed=5)]
    assert first == again
