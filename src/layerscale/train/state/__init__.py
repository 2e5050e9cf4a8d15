"""What a run keeps on disk to resume exactly: checkpoints (``checkpoint``), the trainer's part of them
(``trainer_checkpoint``), their training-state fields and fit (``train_state``, ``train_state_fit``), callback and
RNG state (``callback_state``, ``rng``), what makes one good (``finite_check``), the run lock (``run_lock``) and
where the weights are (``run_paths``)."""
