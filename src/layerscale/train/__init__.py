"""Training: optimizer parameter groups (and, with the training extra, the trainer)."""

from .param_groups import is_scale_parameter, param_groups

__all__ = ["is_scale_parameter", "param_groups"]
