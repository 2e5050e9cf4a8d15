"""Healing an edited model: the short fine-tune of any family (``heal_loop``, with LoRA in ``lora``), and the
run-recipe fine-tune of a pruned training run (``prune_heal``)."""
