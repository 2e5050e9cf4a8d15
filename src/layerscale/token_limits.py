"""What token inputs a language model takes: how many ids its input embedding has rows for, and how long a sequence.

Read from the model, whoever built it (so it sits beside :mod:`layerscale.weight_checks`, below both the trainer's
token-id check and the analysis's tokenizer check, rather than with our model families):

* :func:`input_embedding_rows`: ``model.get_input_embeddings()`` when it returns an ``nn.Embedding`` (Hugging Face
  models, timm-style wrappers), else the model's positive integer ``vocab_size`` attribute (this library's GPT);
  ``None`` when neither says (an ``nn.Embedding`` found elsewhere in a model may be a position table, so none is
  searched for).
* :func:`max_positions`: Hugging Face ``config.max_position_embeddings`` / ``config.n_positions`` (of
  ``config.get_text_config()``: a model that also reads images, Gemma 3 or LLaVA, keeps them in its text config),
  else our GPT's ``block_size``; ``None`` when the model states no maximum (rotary models without one).
"""

from __future__ import annotations

from torch import nn

__all__ = ["input_embedding_rows", "max_positions", "text_config"]


def _positive_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def input_embedding_rows(model: nn.Module) -> int | None:
    """How many token ids ``model``'s input embedding has rows for (module docstring); ``None``: unknown."""
    get = getattr(model, "get_input_embeddings", None)
    if callable(get):
        try:
            embedding = get()
        except (NotImplementedError, AttributeError):  # transformers' base class raises for models without one
            embedding = None
        if isinstance(embedding, nn.Embedding):
            return embedding.num_embeddings
    return _positive_int(getattr(model, "vocab_size", None))


def max_positions(model: nn.Module) -> int | None:
    """The longest sequence ``model`` takes (module docstring); ``None`` when unbounded."""
    config = getattr(model, "config", None)
    if config is not None:
        config = text_config(config)
        for key in ("max_position_embeddings", "n_positions"):
            value = _positive_int(getattr(config, key, None))
            if value is not None:
                return value
    return _positive_int(getattr(model, "block_size", None))


def text_config(config):
    """The config of a Hugging Face model's language model: ``config.get_text_config()`` (the config itself for a
    causal LM; the nested text config of a model that also reads images, which holds its depth and positions)."""
    return config.get_text_config() if callable(getattr(config, "get_text_config", None)) else config
