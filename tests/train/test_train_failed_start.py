"""A user's token data that does not fit the model is refused before anything is written, and a new run whose first
step meets bad input leaves nothing behind, so the same ``out`` works for the retry (audit 2026-12-07, section 6:
``RUN_DIR`` kept ``.lock``, ``config.yaml`` and ``metrics.jsonl``, and the retry was refused as "not empty")."""

import pytest
import torch
from torch import nn
from torch.utils.data import Dataset, TensorDataset

from layerscale import create_model
from layerscale.train import Callback, run
from layerscale.train.state.failed_start import FailedStart

CONFIG = {"data": {"batch_size": 8}, "optim": {"max_steps": 2}, "run": {"progress": "none"}}


def windows(high: int, n: int = 16, length: int = 8, seed: int = 0) -> TensorDataset:
    """``(tokens, next tokens)`` windows of ids in ``[0, high]``."""
    tokens = torch.randint(0, high + 1, (n, length + 1), generator=torch.Generator().manual_seed(seed))
    tokens[0, :2] = torch.tensor([0, high])  # both ends of the range in the inputs
    return TensorDataset(tokens[:, :-1], tokens[:, 1:])


class Listed(Dataset):
    """The same windows behind ``__getitem__`` only (a dataset that does not hold its tensors)."""

    def __init__(self, data: TensorDataset) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index):
        return self.data[index]


class PlainEmbeddingLM(nn.Module):
    """A user's language model with no ``vocab_size`` and no ``get_input_embeddings``: only its first step can tell
    that an id is past its embedding (torch's IndexError)."""

    def __init__(self, vocab: int = 10) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, 8)
        self.head = nn.Linear(8, vocab)

    def forward(self, tokens):
        return self.head(self.embed(tokens))


def gpt(vocab: int = 50) -> nn.Module:
    return create_model("gpt", vocab_size=vocab, block_size=8, embed_dim=16, depth=1, num_heads=2)


@pytest.mark.parametrize("wrap", [lambda d: d, Listed], ids=["TensorDataset", "Dataset"])
@pytest.mark.parametrize("role", ["train_data", "eval_data"])
def test_token_ids_past_the_models_embedding_are_refused_before_anything_is_written(tmp_path, wrap, role):
    data = {"train_data": windows(49), "eval_data": windows(49)}
    data[role] = wrap(windows(79, seed=1))
    with pytest.raises(ValueError, match=rf"^{role}: token ids must be in \[0, 50\) for the 50 input embedding rows "
                                         r"of GPT, got ids from 0 to 79 \(in all 16 samples\)") as info:
        run(model=gpt(), config=CONFIG, out=tmp_path / "run", **data)
    assert "\n" not in str(info.value)
    assert not (tmp_path / "run").exists()


def test_ids_that_fit_train(tmp_path):
    result = run(model=gpt(), train_data=windows(49), eval_data=Listed(windows(49)), config=CONFIG,
                 out=tmp_path / "run")
    assert result.step == 2


def test_a_first_step_that_fails_leaves_nothing_and_the_same_out_works_again(tmp_path):
    out = tmp_path / "made" / "by" / "run"  # parents this start makes go too
    with pytest.raises(IndexError):
        run(model=PlainEmbeddingLM(vocab=10), train_data=windows(79), config=CONFIG, out=out)
    assert not (tmp_path / "made").exists()
    assert run(model=PlainEmbeddingLM(vocab=80), train_data=windows(79), config=CONFIG, out=out).step == 2


def test_a_folder_that_was_there_keeps_what_it_held(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / ".lock").write_text("")  # an empty run directory may hold a lock file from before
    with pytest.raises(IndexError):
        run(model=PlainEmbeddingLM(vocab=10), train_data=windows(79), config=CONFIG, out=out)
    assert sorted(p.name for p in out.iterdir()) == [".lock"]


def test_a_run_that_trained_is_never_undone(tmp_path):
    """A step was taken (its records are worth keeping): a later failure leaves the folder as it is."""

    class FailsAfterStep1(Callback):
        def on_step_end(self, trainer, step):
            raise ValueError(f"bad input met after step {step}")

    with pytest.raises(ValueError, match="after step 1"):
        run(model=PlainEmbeddingLM(vocab=80), train_data=windows(79), config=CONFIG, out=tmp_path / "run",
            callbacks=[FailsAfterStep1()])
    assert (tmp_path / "run" / "config.yaml").is_file()


def test_failed_start_removes_only_what_was_made_since(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "kept.txt").write_text("there before")
    start = FailedStart(tmp_path / "run")
    (tmp_path / "run" / "config.yaml").write_text("made")
    (tmp_path / "run" / "tensorboard").mkdir()
    start.undo()
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["kept.txt"]
