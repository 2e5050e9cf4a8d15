"""``layerscale analyze`` reads a Hugging Face image classifier's folder (ViT, DINOv2) as a user has it: its images
normalised by its own image processor (the loss is the model's loss on pixel values made by transformers'
``AutoImageProcessor`` from the same pixels), or, saved without one, by the training images' statistics, said in the
printed data line; a dataset that does not fit the model is refused in one line."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from layerscale.analysis import DepthAnalysis
from layerscale.cli import main

transformers = pytest.importorskip("transformers")
pytest.importorskip("sklearn")
pytest.importorskip("matplotlib")

from source_models import hf_dinov2, hf_vit  # noqa: E402

QUICK = ["--bootstrap", "20", "--probe-splits", "1", "--no-progress", "--examples", "40"]


def _analyze(folder, out):
    return main(["analyze", str(folder), "--data", "digits", "--out", str(out), *QUICK])


def _test_pixels(count):
    """The first ``count`` digits test images as 8-bit-scale pixels (0–255) and their labels, undoing the
    dataset's own normalisation."""
    from layerscale.data.registry import load_dataset

    bundle = load_dataset("digits", img_size=8, test_fraction=0.2, seed=0)
    images = torch.stack([bundle.test[i][0] for i in range(count)])
    labels = torch.stack([bundle.test[i][1] for i in range(count)])
    unit = images * torch.tensor(bundle.std).view(1, -1, 1, 1) + torch.tensor(bundle.mean).view(1, -1, 1, 1)
    return unit * 255, labels


def test_a_vit_folder_is_scored_on_its_image_processors_pixel_values(tmp_path, capsys):
    folder = tmp_path / "vit"
    hf_vit().save_pretrained(folder)
    transformers.ViTImageProcessor(do_resize=False, image_mean=[0.3], image_std=[0.4]).save_pretrained(folder)
    assert _analyze(folder, tmp_path / "a") == 0
    assert "normalised with the model's image processor's mean and std (preprocessor_config.json)" in \
        capsys.readouterr().out
    pixels, labels = _test_pixels(40)
    processor = transformers.AutoImageProcessor.from_pretrained(folder)  # as a transformers user prepares images
    inputs = processor(images=list(pixels.numpy().astype(np.float32)), input_data_format="channels_first",
                       return_tensors="pt")["pixel_values"]
    model = transformers.AutoModelForImageClassification.from_pretrained(folder).eval()
    with torch.no_grad():
        expected = F.cross_entropy(model(pixel_values=inputs).logits, labels).item()
    result = DepthAnalysis.read_json(tmp_path / "a" / "analysis.json")
    assert result.depth == 3 and result.num_examples == 40 and result.task == "classification"
    assert result.clean_loss == pytest.approx(expected, rel=1e-5)


def test_a_dinov2_folder_without_a_processor_is_scored_on_the_datasets_statistics(tmp_path, capsys):
    folder = tmp_path / "dinov2"
    model = hf_dinov2()
    model.save_pretrained(folder)
    assert _analyze(folder, tmp_path / "a") == 0
    printed = capsys.readouterr().out
    assert "normalised with the training images' own mean and std (the folder has no preprocessor_config.json)" \
        in printed
    from layerscale.data.registry import load_dataset

    bundle = load_dataset("digits", img_size=8, test_fraction=0.2, seed=0)
    images = torch.stack([bundle.test[i][0] for i in range(40)])
    labels = torch.stack([bundle.test[i][1] for i in range(40)])
    with torch.no_grad():
        expected = F.cross_entropy(model(pixel_values=images).logits, labels).item()
    result = DepthAnalysis.read_json(tmp_path / "a" / "analysis.json")
    assert result.depth == 3 and result.clean_loss == pytest.approx(expected, rel=1e-5)


def test_data_that_does_not_fit_the_model_is_refused_in_one_line(tmp_path, capsys):
    folder = tmp_path / "rgb"
    hf_vit(channels=3).save_pretrained(folder)
    capsys.readouterr()  # transformers' own output while saving
    assert _analyze(folder, tmp_path / "a") == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "has 1 channel(s) but" in err and "takes 3" in err
    assert not (tmp_path / "a").exists()
