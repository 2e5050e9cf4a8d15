"""What token inputs a model takes, read the same way by training's id check and by analyze's tokenizer check."""

from __future__ import annotations

import pytest
from torch import nn

from layerscale.models import create_model
from layerscale.token_limits import input_embedding_rows, max_positions


def test_our_gpt_rows_and_positions():
    model = create_model("gpt_nano", vocab_size=300, block_size=48)
    assert input_embedding_rows(model) == 300
    assert max_positions(model) == 48


def test_hugging_face_model_rows_and_positions():
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(vocab_size=97, n_positions=40, n_embd=16, n_layer=1, n_head=2)
    model = transformers.GPT2LMHeadModel(config)
    assert input_embedding_rows(model) == 97
    assert max_positions(model) == 40


def test_an_image_text_model_positions_from_its_text_config():
    transformers = pytest.importorskip("transformers")
    config = transformers.LlavaConfig(
        text_config=dict(model_type="llama", hidden_size=16, intermediate_size=16, num_hidden_layers=1,
                         num_attention_heads=2, vocab_size=50, max_position_embeddings=40),
        vision_config=dict(model_type="clip_vision_model", hidden_size=16, intermediate_size=16, num_hidden_layers=1,
                           num_attention_heads=2, image_size=28, patch_size=14), image_token_index=49)
    model = transformers.LlavaForConditionalGeneration(config)
    assert input_embedding_rows(model) == 50
    assert max_positions(model) == 40


def test_rows_from_the_input_embedding_not_vocab_size():
    class Resized(nn.Module):
        vocab_size = 10

        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(12, 4)

        def get_input_embeddings(self):
            return self.embed

    assert input_embedding_rows(Resized()) == 12


def test_unknown_when_the_model_says_nothing_usable():
    class Raises(nn.Module):
        vocab_size = True  # a bool is not a size

        def get_input_embeddings(self):
            raise NotImplementedError

    assert input_embedding_rows(Raises()) is None
    assert input_embedding_rows(nn.Linear(2, 2)) is None
    assert max_positions(nn.Linear(2, 2)) is None
