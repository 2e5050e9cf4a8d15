"""The Hugging Face ``Trainer`` without weight decay on LayerScale γ, running the residual methods' step hook:
``LayerScaleTrainer``.

``transformers.Trainer`` builds its optimizer from ``get_decay_parameter_names(model)``: every parameter except
those inside an ``nn.LayerNorm`` and those whose name contains ``bias``, ``layernorm``, ``rmsnorm`` or ``norm``
(transformers 5.24). It asks nothing of the model, so the ``layer_scale`` γ that :func:`layerscale.add_layerscale`
puts in a Hugging Face language model — like any LayerScale γ, ours or timm's — would be weight-decayed towards 0.

:class:`LayerScaleTrainer` is ``transformers.Trainer`` with that one method answered by the library's rule
(:func:`layerscale.models.no_decay.decay_parameter_names`): the decay group of :func:`layerscale.param_groups` — no
decay on γ, on any other 1-D parameter (norm weights, biases), on class tokens or on position embeddings. Everything
else is the ``Trainer``'s own. For another ``Trainer`` subclass (trl's ``SFTTrainer``, ...), put
:class:`NoDecayOnScales` first in its bases.

It also adds :class:`ResidualStepCallback`: after every optimizer step it calls
:func:`layerscale.residual.after_optimizer_step` with ``state.global_step`` and ``state.max_steps``, so a model of
ours inside the trained module trains as ``layerscale train`` trains it (BHyT's correction follows the weights, as
its authors' ``UpdateScalerCallback`` does in their ``Trainer`` runs). Another ``Trainer`` adds it with
``trainer.add_callback(ResidualStepCallback)``. Needs the ``hf`` extra (transformers, and accelerate, which the
``Trainer`` needs).
"""

from __future__ import annotations

from torch import nn

try:
    from transformers import Trainer, TrainerCallback
except ImportError:  # pragma: no cover - exercised only without the extra
    raise ImportError("layerscale.integrations.hf_trainer needs transformers: pip install 'torch-layerscale[hf]'"
                      ) from None

from ..models.no_decay import decay_parameter_names
from ..residual.step_hook import after_optimizer_step

__all__ = ["LayerScaleTrainer", "NoDecayOnScales", "ResidualStepCallback"]


class NoDecayOnScales:
    """Mixin for a ``transformers.Trainer`` (sub)class: its optimizer decays exactly the decay group of
    :func:`layerscale.param_groups` (γ, norms, biases, tokens and position embeddings without decay)."""

    def get_decay_parameter_names(self, model: nn.Module) -> list[str]:
        """The names of the parameters the optimizer decays (:func:`~layerscale.models.no_decay.decay_parameter_names`)."""
        return decay_parameter_names(model)


class ResidualStepCallback(TrainerCallback):
    """:func:`~layerscale.residual.after_optimizer_step` on the trained model after each optimizer step."""

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if model is not None:
            after_optimizer_step(model, state.global_step, state.max_steps)


class LayerScaleTrainer(NoDecayOnScales, Trainer):
    """``transformers.Trainer`` whose optimizer never weight-decays a LayerScale γ and which runs the residual
    methods' step hook (see the module docstring)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if not any(isinstance(callback, ResidualStepCallback) for callback in self.callback_handler.callbacks):
            self.add_callback(ResidualStepCallback)
