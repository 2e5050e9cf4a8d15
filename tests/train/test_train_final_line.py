"""``layerscale train``'s final line names the split of every number it shows, and shows the test evaluation of a
run with a validation split (audit 2026-12-07, section 10: its "final accuracy" was the validation accuracy, and
the test accuracy was only in ``summary.json``)."""

import json
import re
from types import SimpleNamespace

from layerscale.train.records.run_summary import final_line


def _result(tmp_path, metrics, test, evals):
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in evals))
    return SimpleNamespace(step=12, metrics=metrics, test=test, run_dir=tmp_path, checkpoint=tmp_path / "none")


def test_with_a_validation_split_the_line_names_validation_and_test(tmp_path):
    evals = [{"step": 6, "split": "eval", "on": "validation", "accuracy": 0.61},
             {"step": 12, "split": "eval", "on": "validation", "accuracy": 0.5874}]
    result = _result(tmp_path, {"on": "validation", "accuracy": 0.5874, "loss": 1.25},
                     {"on": "test", "accuracy": 0.5989, "loss": 1.5}, evals)
    line = final_line(result, 1.0)
    assert re.match(r"done in 1\.0 s: step 12, final validation accuracy 0\.5874 \(best 0\.6100 at step 6\), "
                    r"validation loss 1\.2500, test accuracy 0\.5989, test loss 1\.5000; checkpoint ", line), line


def test_without_a_validation_split_the_final_numbers_are_named_test(tmp_path):
    evals = [{"step": 12, "split": "eval", "on": "test", "loss": 2.0, "perplexity": 7.389}]
    result = _result(tmp_path, {"on": "test", "loss": 2.0, "perplexity": 7.389}, {}, evals)
    assert re.match(r"done in 1\.0 s: step 12, test loss 2\.0000, test perplexity 7\.3890; checkpoint ",
                    final_line(result, 1.0))
