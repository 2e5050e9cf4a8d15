"""Statistics as pure array functions (no model, no I/O): the example bootstrap of :mod:`.bootstrap`."""

from .bootstrap import bootstrap_means, bootstrap_weights, percentile_interval, value_shares

__all__ = ["bootstrap_means", "bootstrap_weights", "percentile_interval", "value_shares"]
