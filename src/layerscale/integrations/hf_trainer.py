"""The Hugging Face ``Trainer`` without weight decay on LayerScale γ: ``LayerScaleTrainer``.

``transformers.Trainer`` builds its optimizer from ``get_decay_parameter_names(model)``: every parameter except
those inside an ``nn.LayerNorm`` and those whose name contains ``bias``, ``layernorm``, ``rmsnorm`` or ``norm``
(transformers 5.24). It asks nothing of the model, so the ``layer_scale`` γ that :func:`layerscale.add_layerscale`
puts in a Hugging Face language model — like any LayerScale γ, ours or timm's — would be weight-decayed towards 0.

:class:`LayerScaleTrainer` is ``transformers.Trainer`` with that one method answered by the library's rule
(:func:`layerscale.models.no_decay.decay_parameter_names`): the decay group of :func:`layerscale.param_groups` — no
decay on γ, on any other 1-D parameter (norm weights, biases), on class tokens or on position embeddings. Everything
else is the ``Trainer``'s own. For another ``Trainer`` subclass (trl's ``SFTTrainer``, ...), put
:class:`NoDecayOnScales` first in its bases. Needs the ``hf`` extra (transformers, and accelerate, which the
``Trainer`` needs).
"""

from __future__ import annotations

from torch import nn

try:
    from transformers import Trainer
except ImportError:  # pragma: no cover - exercised only without the extra
    raise ImportError("layerscale.integrations.hf_trainer needs transformers: pip install 'torch-layerscale[hf]'"
                      ) from None

from ..models.no_decay import decay_parameter_names

__all__ = ["LayerScaleTrainer", "NoDecayOnScales"]


class NoDecayOnScales:
    """Mixin for a ``transformers.Trainer`` (sub)class: its optimizer decays exactly the decay group of
    :func:`layerscale.param_groups` (γ, norms, biases, tokens and position embeddings without decay)."""

    def get_decay_parameter_names(self, model: nn.Module) -> list[str]:
        """The names of the parameters the optimizer decays (:func:`~layerscale.models.no_decay.decay_parameter_names`)."""
        return decay_parameter_names(model)


class LayerScaleTrainer(NoDecayOnScales, Trainer):
    """``transformers.Trainer`` whose optimizer never weight-decays a LayerScale γ (see the module docstring)."""
