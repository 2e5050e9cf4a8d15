"""Pre-LN residual: ``x + F(LN(x))`` — GPT-2, DeiT; the baseline of every comparison."""

from ..base import ResidualMethod


class PreNorm(ResidualMethod):
    """``x_{l+1} = x_l + F(LN(x_l))`` with standard initialisation (Radford et al. 2019; Xiong et al. 2020)."""

    name = "prenorm"
