"""What a block does to the stream and what it holds: angular distance and update norm (``geometry``), CKA
(``cka``), linear probes with their control task and curves (``probes``, ``control_task``, ``probe_curves``), and
a language model's perplexity (``perplexity``)."""
