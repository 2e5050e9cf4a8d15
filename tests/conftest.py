"""Every test runs on one intra-op thread: the models in the tests are tiny (fastest that way), and the suite may
run as several pytest workers on a machine with few cores."""

import pytest
import torch


@pytest.fixture(autouse=True)
def one_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
