"""Methods that differ in where the LayerNorm sits or what replaces it: Pre-LN, Post-LN, Peri-LN, Mix-LN, NormFormer,
LayerNorm Scaling, DyT and BHyT."""
