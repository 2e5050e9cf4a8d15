"""The training loop and its parts: the trainer (``trainer``), the objective, optimizer, parameter groups and
schedule (``objective``, ``optimizer``, ``param_groups``, ``schedule``), the step budget (``budget``), the
precision and compile rules (``auto_policy``), samplers, early stopping, progress, and locating a non-finite
value (``nonfinite``)."""
