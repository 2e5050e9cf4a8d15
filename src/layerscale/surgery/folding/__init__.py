"""Folding LayerScale away for deployment: in a built model (``fold``, with timm CaiT's folded blocks in
``timm_cait_blocks``), in a state dict (``fold_state_dict``), and the ``layerscale fold`` command (``cli``)."""
