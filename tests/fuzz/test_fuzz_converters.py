"""Fuzzing the converters and the CLI: state dicts with the right names but wrong dtypes, shapes or missing and
extra keys, in every format; ``convert`` / ``fold`` on hostile files give one line and exit 2 and leave no file."""

import pytest
import torch
from fuzz_helpers import DTYPES, headers, header_json, safetensors_bytes, state_dicts, torch_save_bytes, with_header
from hypothesis import given
from hypothesis import strategies as st

from layerscale.cli import main
from layerscale.interop import convert_with_report, export_state_dict, list_formats, load_pretrained_into
from layerscale.models import create_model

pytest.importorskip("safetensors")


def tiny_vit():
    torch.manual_seed(0)
    return create_model("vit", img_size=8, patch_size=4, embed_dim=16, depth=2, num_heads=2, num_classes=3)


@pytest.fixture(scope="module")
def reference():
    return {k: v.clone() for k, v in tiny_vit().state_dict().items()}


@st.composite
def damaged(draw, reference):
    """``reference`` with some tensors re-typed, re-shaped, dropped, or renamed, and some keys added."""
    out = dict(reference)
    names = sorted(reference)
    for name in draw(st.lists(st.sampled_from(names), max_size=3, unique=True)):
        action = draw(st.sampled_from(["dtype", "shape", "drop", "rename"]))
        if action == "dtype":
            out[name] = out[name].to(draw(st.sampled_from(DTYPES)))
        elif action == "shape":
            out[name] = torch.zeros(draw(st.lists(st.integers(0, 5), max_size=3)))
        elif action == "drop":
            del out[name]
        else:
            out[name + draw(st.sampled_from(["x", ".weight", "_1"]))] = out.pop(name)
    return out


@given(data=st.data(), strict=st.booleans(), source=st.sampled_from(["auto", *list_formats()]))
def test_damaged_state_dicts_load_exactly_or_refuse(reference, data, strict, source):
    state = data.draw(damaged(reference))
    model = tiny_vit()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    try:
        load_pretrained_into(model, state, source=source, strict=strict)
    except ValueError as exc:
        assert "\n" not in str(exc)
        after = model.state_dict()
        assert all(torch.equal(before[k], after[k]) for k in before), "a refused load changed the model"
        return
    for key, value in model.state_dict().items():  # a load that succeeds copied every tensor it was given
        if key in state:
            assert torch.equal(value, state[key].to(value.dtype))


@given(state=state_dicts, source=st.sampled_from(["auto", *list_formats()]),
       target=st.sampled_from(list_formats()))
def test_random_state_dicts_convert_or_refuse(state, source, target):
    try:
        converted, report = convert_with_report(state, source, target)
    except ValueError as exc:
        assert "\n" not in str(exc)
        return
    assert all(isinstance(v, torch.Tensor) for v in converted.values())


@given(target=st.sampled_from(list_formats()))
def test_export_of_our_model_converts_or_refuses(target):
    try:
        export_state_dict(tiny_vit(), target)
    except ValueError as exc:
        assert "\n" not in str(exc)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz-cli")


hostile_files = st.one_of(
    st.builds(lambda h, b: with_header(header_json(h), b), headers, st.binary(max_size=32)),
    st.builds(lambda sd, cut: safetensors_bytes(sd)[:cut], state_dicts, st.integers(0, 200)),
    st.builds(lambda sd, cut: torch_save_bytes(sd)[:cut], state_dicts, st.integers(0, 2000)),
    st.binary(max_size=64),
)


@given(blob=hostile_files, command=st.sampled_from(["convert", "fold"]))
def test_cli_on_hostile_files_is_one_line_and_leaves_no_file(work, capsys, blob, command):
    src, dst = work / "src.bin", work / "out" / "dst.safetensors"
    dst.parent.mkdir(exist_ok=True)
    src.write_bytes(blob)
    code = main([command, str(src), str(dst), "--force"])
    err = capsys.readouterr().err
    if code == 0:
        dst.unlink()
    else:
        assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert list(dst.parent.iterdir()) == [], "a partial or temporary output file was left"
