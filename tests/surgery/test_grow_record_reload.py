"""The record of which blocks ``grow`` added survives the plain libraries' own save and load — timm's
``save_for_hf`` / ``create_model("local-dir:...")`` (in ``pretrained_cfg``) and Hugging Face's ``save_pretrained`` /
``from_pretrained`` (in the config) — and :func:`~layerscale.surgery.growth.new_blocks.freeze_all_but_new_blocks` reads
it there; pruning forgets it."""

from __future__ import annotations

import pytest

from layerscale import grow, prune
from layerscale.surgery.growth.new_blocks import freeze_all_but_new_blocks, new_block_indices

timm = pytest.importorskip("timm")
transformers = pytest.importorskip("transformers")

from source_models import llama, timm_vit  # noqa: E402


def _trainable_blocks(names, prefix):
    return sorted({int(name[len(prefix):].split(".")[0]) for name in names})


def test_timm_grown_model_keeps_its_new_blocks_through_plain_timm(tmp_path):
    grown = grow(timm_vit(depth=4), 2, where="every:2")
    assert new_block_indices(grown) == (2, 5)
    timm.models.save_for_hf(grown, str(tmp_path / "g"), safe_serialization=True)  # timm's own save, not ours
    loaded = timm.create_model(f"local-dir:{tmp_path / 'g'}", pretrained=True)
    assert new_block_indices(loaded) == (2, 5)
    trainable = freeze_all_but_new_blocks(loaded)
    assert trainable and _trainable_blocks(trainable, "blocks.") == [2, 5]
    assert all(not p.requires_grad for n, p in loaded.named_parameters() if n not in trainable)
    assert new_block_indices(prune(loaded, [0])) is None  # the indices no longer hold


def test_hf_grown_model_keeps_its_new_blocks_through_plain_from_pretrained(tmp_path):
    from layerscale.surgery.folding.fold import fold_layerscale

    grown = grow(llama(64, layers=2), 1, where="top")
    fold_layerscale(grown)  # plain from_pretrained then loads every weight
    grown.save_pretrained(tmp_path / "g")
    loaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "g")
    assert new_block_indices(loaded) == (2,)
    trainable = freeze_all_but_new_blocks(loaded)
    assert _trainable_blocks(trainable, "model.layers.") == [2]


def test_a_malformed_timm_note_is_refused_in_one_line():
    model = timm_vit(depth=2)
    model.pretrained_cfg = {**model.pretrained_cfg, "notes": ("layerscale_new_blocks: [1, 'x']",)}
    with pytest.raises(ValueError, match=r"expected 'layerscale_new_blocks: \[i, j, \.\.\.\]'"):
        new_block_indices(model)
