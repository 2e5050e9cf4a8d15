"""Removing blocks on cached streams: the stream cache (``streams``), single-block ablation and early exit
(``ablation``), any set of blocks (``set_removal``) and contiguous spans (``span_removal``)."""
