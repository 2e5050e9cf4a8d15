"""Bad sources and bad language data are refused by ``analyze`` and ``prune`` (and, for the model itself, ``grow``
and ``fold``) in one line, exit status 2, nothing written: a tokenizer that does not fit the model's embedding, a
sequence length past its positions, empty / binary data, JSONL without the field, links, a shard index naming files
outside the folder, non-finite weights."""

from __future__ import annotations

import pytest
import torch

from layerscale.cli import main

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from source_models import (corpus_lines, hf_folder, llama, tokenizer_vocab, train_bpe_tokenizer,  # noqa: E402
                           write_jsonl, write_text)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("refusals")
    lines = corpus_lines(200)
    tokenizer = train_bpe_tokenizer(root / "tokenizer", lines)
    vocab = tokenizer_vocab(tokenizer)
    small = llama(vocab - 10, layers=2)
    with torch.no_grad():
        nan_model = llama(vocab, layers=2)
        nan_model.model.layers[1].mlp.up_proj.weight[0, 0] = float("nan")
    files = {"corpus": write_text(root / "corpus.txt", lines), "empty": root / "empty.txt",
             "blank": root / "blank.txt", "binary": root / "binary.txt",
             "jsonl": write_jsonl(root / "corpus.jsonl", lines, field="body"), "link": root / "link.txt"}
    files["empty"].write_bytes(b"")
    files["blank"].write_text(" \n\n\t\n")
    files["binary"].write_bytes(b"text\x00\x01\x02" * 50)
    files["link"].symlink_to(files["corpus"])
    linked = hf_folder(root / "linked", llama(vocab, layers=2), tokenizer)
    (linked / "model.safetensors").rename(root / "outside.safetensors")
    (linked / "model.safetensors").symlink_to(root / "outside.safetensors")
    escaping = _shards_elsewhere(hf_folder(root / "escaping", llama(vocab, layers=2), tokenizer, shard="20KB"),
                                 root / "elsewhere", absolute=True)
    climbing = _shards_elsewhere(hf_folder(root / "climbing", llama(vocab, layers=2), tokenizer, shard="20KB"),
                                 root / "elsewhere2", absolute=False)
    return {"model": hf_folder(root / "model", llama(vocab, layers=2, positions=32), tokenizer),
            "escaping": escaping, "climbing": climbing,
            "bare": hf_folder(root / "bare", llama(vocab, layers=2), None), "tokenizer": tokenizer,
            "small": hf_folder(root / "small", small, tokenizer), "nan": hf_folder(root / "nan", nan_model, tokenizer),
            "linked": linked, **files}


def _shards_elsewhere(folder, elsewhere, absolute):
    """Move the sharded checkpoint's shards out of ``folder`` into ``elsewhere`` and point its index at them there
    (by absolute path, or by a ``../`` path): a hostile index loading weights from outside the folder."""
    import json

    index = folder / "model.safetensors.index.json"
    content = json.loads(index.read_text())
    elsewhere.mkdir()
    for name in set(content["weight_map"].values()):
        (folder / name).rename(elsewhere / name)
    where = (lambda name: str(elsewhere / name)) if absolute else (lambda name: f"../{elsewhere.name}/{name}")
    content["weight_map"] = {k: where(v) for k, v in content["weight_map"].items()}
    index.write_text(json.dumps(content))
    return folder


CASES = [
    ("escaping", ["--data-path", "{corpus}"], "expected the bare name of a shard file in the same folder"),
    ("climbing", ["--data-path", "{corpus}"], "expected the bare name of a shard file in the same folder"),
    ("small", ["--data-path", "{corpus}"], "does not fit this model"),
    ("model", ["--data-path", "{corpus}", "--seq-len", "33"], "--seq-len 33 is past the model's 32 positions"),
    ("model", ["--data-path", "{empty}"], "holds no text"),
    ("model", ["--data-path", "{blank}"], "holds no text"),
    ("model", ["--data-path", "{binary}"], "binary"),
    ("model", ["--data-path", "{jsonl}"], "has no field 'text'"),
    ("model", ["--data-path", "{corpus}", "--text-field", "body"], "line 1: not valid JSON"),
    ("model", ["--data-path", "{link}"], "symbolic link"),
    ("model", ["--data-path", "{corpus}", "--tokenizer", "{corpus}"], "--tokenizer must be a tokenizer folder"),
    ("bare", ["--data-path", "{corpus}"], "has no tokenizer files; give --tokenizer"),
    ("linked", ["--data-path", "{corpus}"], "symbolic link inside the model folder"),
    ("nan", ["--data-path", "{corpus}"], "'model.layers.1.mlp.up_proj.weight' holds 1 NaN or infinite value"),
]


@pytest.mark.parametrize("command", ["analyze", "prune"])
@pytest.mark.parametrize("model,args,message", CASES)
def test_refused_in_one_line_rc2_nothing_written(world, tmp_path, capsys, command, model, args, message):
    filled = [a.format(**{k: str(v) for k, v in world.items()}) for a in args]
    out = tmp_path / "out"
    extra = ["--no-progress"] if command == "analyze" else ["--by", "angular", "--remove", "1"]
    capsys.readouterr()
    assert main([command, str(world[model]), *filled, "--seq-len", "16", "--out", str(out), *extra]
                if "--seq-len" not in filled else [command, str(world[model]), *filled, "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert not out.exists() or not any(out.iterdir())
    assert not [p for p in tmp_path.iterdir() if p.name != "out"]


def test_non_finite_weights_refused_by_grow_and_fold(world, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["grow", str(world["nan"]), "--insert", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "'model.layers.1.mlp.up_proj.weight' holds 1 NaN" in err and "\n" not in err and not out.exists()
    pytest.importorskip("safetensors")
    from safetensors.torch import save_file

    from layerscale import create_model

    weights = create_model("vit", img_size=8, patch_size=4, in_chans=1, num_classes=3, embed_dim=16, depth=2,
                           num_heads=2).state_dict()
    weights["blocks.1.mlp.fc1.weight"][0, 1] = float("inf")
    save_file({k: v.contiguous() for k, v in weights.items()}, str(tmp_path / "w.safetensors"))
    assert main(["fold", str(tmp_path / "w.safetensors"), str(tmp_path / "folded.safetensors")]) == 2
    err = capsys.readouterr().err.strip()
    assert "'blocks.1.mlp.fc1.weight' holds 1 NaN or infinite" in err and "\n" not in err
    assert not (tmp_path / "folded.safetensors").exists()


def test_an_image_dataset_that_does_not_fit_a_timm_folder_is_refused(tmp_path, capsys):
    pytest.importorskip("timm")
    pytest.importorskip("sklearn")
    import timm

    from source_models import timm_folder, timm_vit

    three = timm.create_model("vit_tiny_patch16_224", img_size=8, patch_size=4, in_chans=3, num_classes=10, depth=2,
                              embed_dim=32, num_heads=2)
    five = timm_vit(depth=2)
    five.reset_classifier(5)
    for model, message in ((three, "has 1 channel(s) but"), (five, "has 10 classes but")):
        folder = timm_folder(tmp_path / message[:6].strip(), model)
        out = tmp_path / "out"
        assert main(["analyze", str(folder), "--data", "digits", "--out", str(out), "--no-progress"]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and "does not fit this model" in err and "\n" not in err
        assert not out.exists()
