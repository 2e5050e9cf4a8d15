"""Pruning a model's depth: removing blocks (``prune``), the criteria compared before it (``prune_criteria``),
the table of losses it prints (``prune_eval``), healing the pruned model against its unpruned control
(``prune_healing``, on :mod:`layerscale.surgery.healing`), and the ``layerscale prune`` command (``prune_cli``)."""
