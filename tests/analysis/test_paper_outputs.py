"""Outputs to paste into a paper: a summary of at most three lines, the chance flag, and SVG / PDF figures and
Markdown / LaTeX tables that exist and parse."""

from __future__ import annotations

import json
import math
import re
import xml.etree.ElementTree as ET

import pytest
import torch

from layerscale.analysis import analyze_depth
from layerscale.analysis.chance import chance_loss, chance_note, near_chance
from layerscale.analysis.outputs.paper_figures import figure_angular_heatmap, vector_bytes
from layerscale.analysis.outputs.paper_outputs import analysis_paper_files, write_files
from layerscale.analysis.outputs.paper_tables import latex_escape
from layerscale.analysis.pruning.criterion_comparison import CriterionComparison
from layerscale.models.registry import create_model

from analysis_helpers import self_labelled_vit

pytest.importorskip("matplotlib")


def _vit(depth, width=16, seed=0):
    torch.manual_seed(seed)
    return create_model("vit", img_size=8, patch_size=4, in_chans=1, num_classes=5, embed_dim=width, depth=depth,
                        num_heads=2).eval()


def _learned(depth=4, examples=24):
    """A random-weight ViT judged on its own sharp predictions: its loss is far from chance."""
    return self_labelled_vit(depth, examples, gamma_floor=0.5, data_seed=1)


def test_the_summary_of_a_depth_48_model_fits_in_three_short_lines():
    model = _vit(48, width=8)
    images, labels = torch.randn(6, 1, 8, 8, generator=torch.Generator().manual_seed(0)), torch.arange(6) % 5
    result = analyze_depth(model, (images, labels), probes=False, bootstrap=20, batch_size=6)
    lines = result.summary.lines
    assert 2 <= len(lines) <= 3
    assert all(len(line) <= 200 for line in lines), [len(line) for line in lines]
    assert lines[0].startswith("effective depth") and "of 48" in lines[0] and "set variant" in lines[0]


def test_chance_is_ln_of_the_classes_or_vocabulary_and_the_flag_is_within_five_percent():
    assert chance_loss(10) == pytest.approx(math.log(10))
    assert near_chance(0.951 * math.log(10), 10) and not near_chance(0.949 * math.log(10), 10)
    assert near_chance(5.0, 10) and near_chance(float("nan"), 10)
    note = chance_note(4.1, 64, "language_model")
    assert note is not None and "ln 64 vocabulary = 4.159" in note and "\n" not in note
    assert chance_note(1.0, 64, "language_model") is None
    with pytest.raises(ValueError, match="must be an int >= 2, got 1"):
        chance_loss(1)


def test_a_model_at_chance_is_flagged_and_a_model_that_learned_is_not():
    images, labels = torch.randn(40, 1, 8, 8, generator=torch.Generator().manual_seed(0)), torch.arange(40) % 5
    at_chance = analyze_depth(_vit(3), (images, labels), probes=False, bootstrap=20)
    assert at_chance.clean_loss >= 0.95 * math.log(5)
    assert at_chance.summary.chance_warning is not None and at_chance.summary.outputs == 5
    assert len(at_chance.summary.lines) == 3 and at_chance.summary.lines[2] == at_chance.summary.chance_warning
    model, images, labels = _learned()
    learned = analyze_depth(model, (images, labels), probes=False, bootstrap=20)
    assert learned.clean_loss < 0.95 * math.log(5)
    assert learned.summary.chance_warning is None and len(learned.summary.lines) == 2


def test_a_language_model_at_chance_is_flagged_against_its_vocabulary():
    torch.manual_seed(0)
    gpt = create_model("gpt", vocab_size=64, block_size=16, embed_dim=16, depth=2, num_heads=2).eval()
    result = analyze_depth(gpt, torch.randint(0, 64, (8, 9), generator=torch.Generator().manual_seed(0)),
                           bootstrap=20)
    assert result.summary.outputs == 64 and "ln 64 vocabulary" in result.summary.chance_warning


def _check_svg(data: bytes) -> None:
    root = ET.fromstring(data)
    assert root.tag.endswith("svg") and root.findall(".//{http://www.w3.org/2000/svg}path")


def _check_pdf(data: bytes) -> None:
    assert data.startswith(b"%PDF-") and data.rstrip().endswith(b"%%EOF") and b"/Page" in data


def _check_markdown(text: str, rows: int, columns: int) -> None:
    table = [line for line in text.splitlines() if line.startswith("|")]
    assert len(table) == rows + 2
    assert re.fullmatch(r"\|(---\|)+", table[1]) and table[1].count("---") == columns
    assert all(line.count("|") == columns + 1 for line in table)


def _check_latex(text: str, rows: int, columns: int) -> None:
    assert text.startswith("\\begin{table}") and text.rstrip().endswith("\\end{table}")
    spec = re.search(r"\\begin\{tabular\}\{(l+)\}", text)
    assert spec and len(spec.group(1)) == columns
    body = text[text.index("\\midrule") + len("\\midrule"):text.index("\\bottomrule")]
    lines = [line for line in body.strip().splitlines()]
    assert len(lines) == rows and all(line.endswith("\\\\") for line in lines)
    assert all(len(re.findall(r"(?<!\\)&", line)) == columns - 1 for line in lines)
    for marker in ("\\toprule", "\\midrule", "\\bottomrule", "\\caption{", "\\label{"):
        assert text.count(marker) == 1
    assert text.count("{") - text.count("\\{") == text.count("}") - text.count("\\}")
    assert not re.search(r"[_%#]", re.sub(r"\\[_%#&{}$]", "", text.split("\\label{")[0])), "unescaped"


def test_paper_files_exist_and_parse(tmp_path):
    model, images, labels = _learned(depth=4)
    result = analyze_depth(model, (images, labels), probes=False, bootstrap=50,
                           criteria="gromov,block_influence,ablation")
    files = analysis_paper_files(result)
    paths = write_files(tmp_path, files)
    names = {p.name for p in paths}
    for stem in ("removal_gromov", "removal_block_influence", "removal_ablation", "angular_heatmap"):
        assert {f"{stem}.svg", f"{stem}.pdf"} <= names
    for kind in ("criteria", "depth_summary", "depth_blocks"):
        assert {f"{kind}.md", f"{kind}.tex"} <= names
    for path in paths:
        data = path.read_bytes()
        if path.suffix == ".svg":
            _check_svg(data)
        elif path.suffix == ".pdf":
            _check_pdf(data)
    # criteria: one row per n = 1 … L − 1, a Δ loss and a blocks column per criterion
    _check_markdown((tmp_path / "criteria.md").read_text(), 3, 7)
    _check_latex((tmp_path / "criteria.tex").read_text(), 3, 7)
    _check_markdown((tmp_path / "depth_blocks.md").read_text(), 4, 4)
    _check_latex((tmp_path / "depth_blocks.tex").read_text(), 4, 4)
    summary = (tmp_path / "depth_summary.md").read_text()
    assert f"| effective depth, set variant (exhaustive) | {result.summary.set_depth} [" in summary
    criteria_md = (tmp_path / "criteria.md").read_text()
    curve = result.criteria["curves"]["gromov"]
    low, high = curve["delta_loss_interval"][0]
    assert f"| 1 | {curve['delta_loss'][0]:.3f} [{low:.3f}, {high:.3f}] |" in criteria_md
    assert "evaluation examples" in criteria_md  # a classifier's unit; a language model's is windows
    # criteria.json: the comparison itself at full precision, read back into the same object
    assert CriterionComparison.from_dict(json.loads((tmp_path / "criteria.json").read_text())) == \
        CriterionComparison.from_dict(result.criteria)


def test_figures_are_reproducible_and_the_heatmap_checks_its_matrix():
    distance = [[0.0, 0.2, 0.3], [0.2, 0.0, 0.1], [0.3, 0.1, 0.0]]
    first = vector_bytes(figure_angular_heatmap(distance, "cls"), "svg")
    assert first == vector_bytes(figure_angular_heatmap(distance, "cls"), "svg")
    assert b"<dc:date>" not in first and b"CreationDate" not in vector_bytes(
        figure_angular_heatmap(distance, "cls"), "pdf")
    with pytest.raises(ValueError, match="needs an \\(L\\+1\\) x \\(L\\+1\\) matrix"):
        figure_angular_heatmap([[0.0, 0.1]], "cls")
    with pytest.raises(ValueError, match="figure format must be one of svg, pdf, got 'png'"):
        vector_bytes(figure_angular_heatmap(distance, "cls"), "png")


def test_latex_escape_spells_what_latex_would_misread():
    assert latex_escape("D_δ < 5 % & #1") == r"D\_$\delta$ $<$ 5 \% \& \#1"
