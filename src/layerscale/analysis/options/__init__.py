"""Command-line options shared by ``layerscale analyze`` and ``layerscale prune``: the data (``data_options``)
and the criteria, set-variant depth and paper outputs (``depth_options``)."""
