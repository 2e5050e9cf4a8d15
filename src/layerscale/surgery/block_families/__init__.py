"""The adapters of :mod:`layerscale.surgery.block_list`, one file per model family."""
