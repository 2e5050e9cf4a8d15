"""Configs ship with the package: ``--config vit_digits`` works from an empty folder, from a wheel installed
outside the repository (item 5 of issue 28)."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from layerscale.train.config.config_source import packaged_config_names, resolve_config_path

REPO = Path(__file__).resolve().parents[2]


def test_the_packaged_configs_are_named_by_their_stem():
    assert packaged_config_names() == ["cait_cifar10", "deep_vit_fashion_mnist", "gpt_text", "vit_digits"]
    assert resolve_config_path("vit_digits").read_text().startswith("# A small LayerScale ViT")


def test_a_file_wins_over_a_packaged_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "vit_digits").write_text("{}")
    assert resolve_config_path("vit_digits") == Path("vit_digits")


@pytest.mark.parametrize(("given", "hint"), [
    ("vit_digit", "(did you mean vit_digits?)"),
    ("configs/vit_digits.yaml", "(the packaged config is --config vit_digits)"),
])
def test_a_missing_config_names_the_packaged_ones(tmp_path, monkeypatch, given, hint):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="config file not found") as info:
        resolve_config_path(given)
    assert hint in str(info.value) and "packaged: cait_cifar10, deep_vit_fashion_mnist" in str(info.value)


@pytest.mark.slow
def test_an_installed_wheel_trains_from_a_packaged_config_in_an_empty_folder(tmp_path):
    wheels, site, empty = tmp_path / "wheels", tmp_path / "site", tmp_path / "empty"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(wheels), str(REPO)], check=True, env=env, cwd=tmp_path, capture_output=True)
    wheel = next(wheels.glob("torch_layerscale-*.whl"))
    assert "layerscale/configs/vit_digits.yaml" in zipfile.ZipFile(wheel).namelist()
    zipfile.ZipFile(wheel).extractall(site)
    env["PYTHONPATH"] = str(site)  # the installed package only: no repository on the path
    code = ("import sys, layerscale; from layerscale.cli import main; assert 'site' in layerscale.__file__; "
            "sys.exit(main(sys.argv[1:]))")
    done = subprocess.run([sys.executable, "-c", code, "train", "--config", "vit_digits", "--out", "run",
                           "--set", "optim.max_steps=2", "--set", "optim.warmup_steps=1",
                           "--set", "run.progress=none", "--set", "diagnostics.enabled=false"],
                          cwd=empty, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (empty / "run" / "summary.json").is_file()
