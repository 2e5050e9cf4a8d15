"""Healing an edited model: the short fine-tune of any family (``heal_loop``, with LoRA in ``lora``), the
run-recipe fine-tune of a pruned training run (``prune_heal``), and the healed-against-control report of
``layerscale prune --heal-steps`` (``prune_healing``)."""
