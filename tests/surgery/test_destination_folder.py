"""``prune`` / ``grow`` refuse, before any work, a DEST that is the source, holds it or lies inside it: replacing
DEST (``--force``) would delete the source or part of it (a run's checkpoints)."""

from __future__ import annotations

import pytest

from layerscale import create_model
from layerscale.cli import main
from layerscale.surgery.model_files import check_destination_folder


def _hashes(folder):
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("where", ["source", "parent", "grandparent"])
def test_a_destination_that_is_or_holds_the_source_is_refused(tmp_path, where):
    source = tmp_path / "a" / "model"
    source.mkdir(parents=True)
    dest = {"source": source, "parent": source.parent, "grandparent": tmp_path}[where]
    message = "is the source itself" if where == "source" else f"holds the source {source}; replacing it would delete"
    with pytest.raises(ValueError, match=message):
        check_destination_folder(dest, force=True, source=source)
    check_destination_folder(tmp_path / "a" / "other", force=True, source=source)  # a sibling is fine


def test_grow_with_force_into_the_sources_parent_keeps_the_source(tmp_path, capsys):
    source = tmp_path / "models" / "vit"
    create_model("vit", img_size=8, patch_size=4, in_chans=1, num_classes=3, embed_dim=16, depth=2,
                 num_heads=2).save_pretrained(source)
    before = _hashes(tmp_path)
    assert main(["grow", str(source), "--insert", "1", "--out", str(tmp_path / "models"), "--force"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"holds the source {source}" in err
    assert _hashes(tmp_path) == before


@pytest.mark.parametrize("command", ["prune", "grow"])
def test_a_destination_inside_the_source_is_refused_and_its_checkpoints_kept(tmp_path, capsys, command):
    source = tmp_path / "models" / "vit"
    create_model("vit", img_size=8, patch_size=4, in_chans=1, num_classes=3, embed_dim=16, depth=2,
                 num_heads=2).save_pretrained(source)
    (source / "checkpoints").mkdir()
    (source / "checkpoints" / "weights.bin").write_bytes(b"trained")
    before = _hashes(tmp_path)
    action = ["--remove", "1", "--blocks", "0"] if command == "prune" else ["--insert", "1"]
    assert main([command, str(source), *action, "--out", str(source / "checkpoints"), "--force"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"lies inside the source {source}" in err
    assert _hashes(tmp_path) == before


@pytest.mark.parametrize("given", ["checkpoint", "weights-file"])
def test_a_destination_inside_the_run_of_a_source_checkpoint_is_refused(train_with_cli, tmp_path, capsys, given):
    """``grow RUN/checkpoints/step_N --out RUN/checkpoints/step_99999999`` wrote a folder that resuming or analysing
    the run would take for its latest checkpoint: a checkpoint counts as its whole run."""
    run = train_with_cli({"model": {"name": "vit", "patch_size": 4, "embed_dim": 16, "num_heads": 2, "depth": 1},
                          "data": {"name": "digits", "batch_size": 64, "augment": False},
                          "optim": {"epochs": 1, "max_steps": 2}}, f"grow-into-run-{given}")
    checkpoint = sorted((run / "checkpoints").iterdir())[-1]
    source = [str(checkpoint)] if given == "checkpoint" else [str(checkpoint / "model.safetensors"), "--config",
                                                               str(run / "config.yaml")]
    before = _hashes(run)
    for dest in (run / "checkpoints" / "step_99999999", run / "grown"):
        assert main(["grow", *source, "--insert", "1", "--out", str(dest)]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and f"lies inside the run {run} of the source" in err
    assert _hashes(run) == before
    assert main(["grow", *source, "--insert", "1", "--out", str(tmp_path / "grown")]) == 0  # outside: written
