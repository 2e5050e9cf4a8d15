"""Bad constructor arguments of every model family, and bad inputs of ``GPT.generate`` / ``GPT.forward``: each a
one-line ``ValueError`` naming the argument and the value, at construction (never a NaN model, a truthy string read
as ``True``, or a torch error at the first forward); the good inputs they neighbour (numpy scalars) still work."""

import math
import re

import numpy as np
import pytest
import torch

from layerscale import create_model
from layerscale.models.validation import MAX_BLOCK_SIZE, MAX_MLP_HIDDEN, check_bool

SMALL = {"vit": dict(img_size=8, patch_size=4, embed_dim=16, depth=2, num_heads=2, num_classes=3),
         "cait": dict(img_size=8, patch_size=4, embed_dim=16, depth=2, num_heads=2, depth_token_only=1,
                      num_classes=3),
         "gpt": dict(vocab_size=16, block_size=8, embed_dim=16, depth=2, num_heads=2)}
#: The boolean constructor arguments of each family.
FLAGS = {"vit": ("qkv_bias", "no_embed_class", "dynamic_img_size"), "cait": ("qkv_bias", "dynamic_img_size"),
         "gpt": ("qkv_bias",)}


def _one_line(exc_info) -> str:
    message = str(exc_info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("family", sorted(SMALL))
@pytest.mark.parametrize("bad", [-1, 0, 0.0, float("nan"), float("inf"), "x", "1e-6", True, None])
def test_norm_eps_must_be_a_finite_number_above_zero(family, bad):
    with pytest.raises(ValueError) as info:
        create_model(family, **SMALL[family], norm_eps=bad)
    assert _one_line(info) == f"norm_eps must be a finite number > 0, got {bad!r}"


@pytest.mark.parametrize("family", sorted(SMALL))
@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm"])
def test_norm_eps_accepts_ints_floats_and_numpy_scalars(family, norm):
    for eps in (1, 1e-5, np.float32(1e-5), np.float64(1e-6)):
        model = create_model(family, **SMALL[family], norm=norm, norm_eps=eps)
        assert math.isclose(model.blocks[0].norm1.eps, float(eps))


@pytest.mark.parametrize("family, flag", [(f, flag) for f in sorted(FLAGS) for flag in FLAGS[f]])
@pytest.mark.parametrize("bad", ["no", "false", 0, 1, None, 1.0])
def test_boolean_arguments_refuse_anything_but_a_bool(family, flag, bad):
    with pytest.raises(ValueError) as info:
        create_model(family, **SMALL[family], **{flag: bad})
    assert _one_line(info) == f"{flag} must be True or False, got {bad!r}"


@pytest.mark.parametrize("family", sorted(SMALL))
def test_boolean_arguments_take_true_false_and_numpy_bools(family):
    for value in (False, np.bool_(False)):
        model = create_model(family, **SMALL[family], qkv_bias=value)
        attn = model.blocks[0].attn
        assert attn.qkv.bias is None
    assert create_model(family, **SMALL[family], qkv_bias=True).blocks[0].attn.qkv.bias is not None


def test_check_bool_returns_a_python_bool():
    assert check_bool("flag", True) is True and check_bool("flag", np.bool_(False)) is False
    with pytest.raises(ValueError, match=r"^flag must be True or False, got 'no'$"):
        check_bool("flag", "no")


@pytest.mark.parametrize("family", sorted(SMALL))
@pytest.mark.parametrize("bad", [2, 1.0, -0.5, float("nan"), "0.1", True])
def test_attn_drop_rate_is_checked_like_drop_rate(family, bad):
    with pytest.raises(ValueError) as info:
        create_model(family, **SMALL[family], attn_drop_rate=bad)
    assert _one_line(info) == f"attn_drop_rate must be a number in [0, 1), got {bad!r}"


@pytest.mark.parametrize("family", sorted(SMALL))
def test_rates_accept_numpy_scalars(family):
    model = create_model(family, **SMALL[family], attn_drop_rate=np.float32(0.25), drop_path_rate=np.float64(0.1))
    model.train()(torch.randint(0, 16, (2, 4)) if family == "gpt" else torch.randn(2, 3, 8, 8))


@pytest.mark.parametrize("family", sorted(SMALL))
def test_mlp_hidden_width_has_a_limit(family):
    with pytest.raises(ValueError) as info:
        create_model(family, **SMALL[family], mlp_ratio=1e9)
    assert _one_line(info) == (f"mlp_ratio 1000000000.0 gives an MLP hidden width int(embed_dim * mlp_ratio) = "
                               f"16000000000 (embed_dim 16), more than {MAX_MLP_HIDDEN} (this library's limit)")
    limit = MAX_MLP_HIDDEN / 16
    with torch.device("meta"):  # at the limit: built (on the meta device, no memory)
        assert create_model(family, **SMALL[family], mlp_ratio=limit).blocks[0].mlp.fc1.out_features == MAX_MLP_HIDDEN


@pytest.mark.parametrize("family", sorted(SMALL))
@pytest.mark.parametrize("bad", [0, -4.0, float("nan"), float("inf"), "4", True])
def test_mlp_ratio_must_be_a_finite_number_above_zero(family, bad):
    with pytest.raises(ValueError, match=re.escape(repr(bad))):
        create_model(family, **SMALL[family], mlp_ratio=bad)


def test_gpt_block_size_has_a_limit():
    with pytest.raises(ValueError) as info:
        create_model("gpt", **{**SMALL["gpt"], "block_size": 2**40})
    assert _one_line(info) == (f"block_size must be at most {MAX_BLOCK_SIZE} (this library's limit), "
                               f"got {2**40}")
    with torch.device("meta"):
        assert create_model("gpt", **{**SMALL["gpt"], "block_size": MAX_BLOCK_SIZE}).block_size == MAX_BLOCK_SIZE


def test_gpt_vocab_size_has_a_limit():
    from layerscale.models.validation import MAX_VOCAB_SIZE

    with pytest.raises(ValueError) as info:
        create_model("gpt", **{**SMALL["gpt"], "vocab_size": 2**40})
    assert _one_line(info) == f"vocab_size must be at most {MAX_VOCAB_SIZE} (this library's limit), got {2**40}"
    with torch.device("meta"):
        assert create_model("gpt", **{**SMALL["gpt"], "vocab_size": MAX_VOCAB_SIZE}).vocab_size == MAX_VOCAB_SIZE


@pytest.fixture(scope="module")
def gpt():
    torch.manual_seed(0)
    return create_model("gpt", **SMALL["gpt"]).eval()


@pytest.mark.parametrize("kwargs, message", [
    (dict(temperature=-1.0), "temperature must be a finite number >= 0 (0: greedy), got -1.0"),
    (dict(temperature=float("nan")), "temperature must be a finite number >= 0 (0: greedy), got nan"),
    (dict(temperature=float("inf")), "temperature must be a finite number >= 0 (0: greedy), got inf"),
    (dict(temperature="1"), "temperature must be a finite number >= 0 (0: greedy), got '1'"),
    (dict(max_new_tokens=-1), "max_new_tokens must be an int >= 0, got -1"),
    (dict(max_new_tokens=2.0), "max_new_tokens must be an int >= 0, got 2.0"),
    (dict(max_new_tokens=True), "max_new_tokens must be an int >= 0, got True"),
])
def test_generate_refuses_bad_sampling_arguments(gpt, kwargs, message):
    args = {"max_new_tokens": 2, **kwargs}
    with pytest.raises(ValueError) as info:
        gpt.generate(torch.zeros(1, 3, dtype=torch.long), **args)
    assert _one_line(info) == message


@pytest.mark.parametrize("prompt, got", [
    (torch.zeros(2, 0, dtype=torch.long), "(2, 0) torch.int64"),
    (torch.zeros(0, 3, dtype=torch.long), "(0, 3) torch.int64"),
    (torch.zeros(3, dtype=torch.long), "(3,) torch.int64"),
    (torch.zeros(1, 3), "(1, 3) torch.float32"),
    ([[1, 2]], "list"),
])
def test_generate_refuses_a_prompt_not_of_shape_b_t(gpt, prompt, got):
    with pytest.raises(ValueError) as info:
        gpt.generate(prompt, 2)
    assert _one_line(info) == ("generate expects a prompt of integer token ids of shape (B, T) with B, T >= 1, "
                               f"got {got}")


@pytest.mark.parametrize("bad, low, high", [(16, 1, 16), (-1, -1, 1)])
def test_token_ids_outside_the_vocabulary_are_named(gpt, bad, low, high):
    tokens = torch.tensor([[1, bad]])
    expected = f"token ids must be in [0, 16) (vocab_size 16), got ids from {low} to {high}"
    for call in (lambda: gpt(tokens), lambda: gpt.generate(tokens, 0)):
        with pytest.raises(ValueError) as info:
            call()
        assert _one_line(info) == expected


def test_generate_keeps_its_good_inputs(gpt):
    prompt = torch.tensor([[1, 2, 3]])
    assert torch.equal(gpt.generate(prompt, 0), prompt)  # nothing to generate: the prompt
    greedy = gpt.generate(prompt, 3, temperature=0)
    assert greedy.shape == (1, 6) and torch.equal(greedy, gpt.generate(prompt, 3, temperature=0.0))
    sampled = gpt.generate(prompt.int(), np.int64(2), temperature=np.float32(0.7),
                           generator=torch.Generator().manual_seed(0))
    assert sampled.shape == (1, 5) and int(sampled.min()) >= 0 and int(sampled.max()) < 16
