"""Hypothesis profiles of the loader fuzz suite.

``ci`` (the default): a fixed seed (``derandomize``: the same examples every run, so CI is reproducible) and 75
examples per test, the whole suite well under a minute on two cores. ``deep``: random seeds and 20x the examples,
for a local hunt, e.g. ``HYPOTHESIS_PROFILE=deep pytest tests/fuzz`` (about 10 minutes on two busy cores; a failing example
is printed and replayed from the local example database).
"""

import os

from hypothesis import HealthCheck, settings

_COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                      HealthCheck.function_scoped_fixture])
settings.register_profile("ci", max_examples=75, derandomize=True, database=None, print_blob=True, **_COMMON)
settings.register_profile("deep", max_examples=1500, derandomize=False, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
