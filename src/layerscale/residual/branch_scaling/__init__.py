"""Methods that scale a residual branch or its skip path: LayerScale (per channel, per head), the scalar ablation,
ReZero, SkipInit, DeepNorm and Admin."""
