"""A Hugging Face image model's normalisation, read from its image processor's ``preprocessor_config.json``, equals
what transformers' own processor (``AutoImageProcessor``) does to the same pixels, for every combination of
rescaling and normalising; a field that is not what a processor writes is refused in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from layerscale.sources.image_processor import PROCESSOR_FILE, processor_normalization
from layerscale.untrusted_files import MAX_CONFIG_BYTES

transformers = pytest.importorskip("transformers")


@pytest.mark.parametrize("settings", [
    {},  # ViTImageProcessor's defaults: rescale by 1/255, mean = std = 0.5
    {"image_mean": [0.485, 0.456, 0.406], "image_std": [0.229, 0.224, 0.225]},
    {"do_rescale": False, "image_mean": [120.0, 110.0, 100.0], "image_std": [60.0, 55.0, 50.0]},
    {"do_normalize": False},
    {"rescale_factor": 1 / 127.5, "image_mean": [1.0, 1.0, 1.0], "image_std": [1.0, 1.0, 1.0]},
    {"image_mean": 0.3, "image_std": 0.2},  # one value for every channel
])
def test_the_normalisation_equals_transformers_own_image_processor(tmp_path, settings):
    transformers.ViTImageProcessor(do_resize=False, **settings).save_pretrained(tmp_path)
    processor = transformers.AutoImageProcessor.from_pretrained(tmp_path)
    pixels = np.random.default_rng(0).integers(0, 256, size=(2, 3, 8, 8)).astype(np.float32)  # 8-bit values
    expected = processor(images=list(pixels), input_data_format="channels_first", return_tensors="pt")["pixel_values"]
    mean, std = processor_normalization(tmp_path, 3)
    ours = (torch.from_numpy(pixels) / 255 - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)
    torch.testing.assert_close(ours, expected.float(), rtol=1e-5, atol=1e-5)


def test_a_folder_without_a_processor_has_no_normalisation(tmp_path):
    assert processor_normalization(tmp_path, 3) is None


@pytest.mark.parametrize("fields, needle", [
    ({"image_mean": [0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}, "image_mean is [0.5, 0.5]; expected 3 finite numbers"),
    ({"image_mean": [0.5] * 3, "image_std": [0.5, 0.0, 0.5]}, "image_std is [0.5, 0.0, 0.5]; expected 3 finite "
                                                                "numbers > 0"),
    ({"image_mean": ["a"] * 3, "image_std": [0.5] * 3}, "image_mean is ['a', 'a', 'a']"),
    ({"image_std": [0.5] * 3}, "no image_mean, and do_normalize is not false"),
    ({"do_normalize": "yes"}, "do_normalize is 'yes'; expected true or false"),
    ({"rescale_factor": 0, "image_mean": [0.5] * 3, "image_std": [0.5] * 3}, "rescale_factor is 0; expected a "
                                                                                "finite number > 0"),
])
def test_a_field_that_no_processor_writes_is_refused_in_one_line(tmp_path, fields, needle):
    (tmp_path / PROCESSOR_FILE).write_text(json.dumps(fields))
    with pytest.raises(ValueError) as exc:
        processor_normalization(tmp_path, 3)
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_a_link_or_an_oversized_processor_file_is_refused(tmp_path):
    outside = tmp_path / "outside.json"
    outside.write_text("{}")
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / PROCESSOR_FILE).symlink_to(outside)
    with pytest.raises(ValueError, match="link"):
        processor_normalization(tmp_path / "folder", 3)
    (tmp_path / "big").mkdir()
    (tmp_path / "big" / PROCESSOR_FILE).write_text(" " * MAX_CONFIG_BYTES + "{}")
    with pytest.raises(ValueError, match="bytes"):
        processor_normalization(tmp_path / "big", 3)
