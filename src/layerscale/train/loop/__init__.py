"""The training loop and its parts: the trainer (``trainer``), the objective, optimizer, parameter groups and
schedule (``objective``, ``optimizer``, ``param_groups``, ``schedule``), the step budget (``budget``), the
precision and compile rules (``auto_policy``), samplers, early stopping and progress. Locating a non-finite value
and its error (:mod:`layerscale.train.nonfinite`) stay one floor up, since the checkpoint checks of
:mod:`layerscale.train.state` raise it too."""
