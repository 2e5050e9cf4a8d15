"""Methods that carry more than one residual stream: Hyper-Connections (dynamic, static, their CPU fused read and
write), mHC, and Attention Residuals (full and block)."""
