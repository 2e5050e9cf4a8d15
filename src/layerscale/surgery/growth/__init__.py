"""Growing a model deeper: identity-initialised blocks (``grow``), which blocks are new (``new_blocks``), and the
``layerscale grow`` command (``grow_cli``)."""
