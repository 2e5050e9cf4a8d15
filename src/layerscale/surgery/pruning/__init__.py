"""Pruning a model's depth: removing blocks (``prune``), the criteria compared before it (``prune_criteria``),
the table of losses it prints (``prune_eval``), and the ``layerscale prune`` command (``prune_cli``)."""
