"""Which blocks can go: one score per block and the best span (``block_ranking``), read on what each model's head reads
(``readout``), the literature's criteria (``criteria``, ``gamma_score``), several criteria compared side by side
(``criterion_comparison``), and the largest removable set of blocks, the set-variant effective depth (``set_depth``)."""
