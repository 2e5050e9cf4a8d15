"""Hugging Face specifics: the residual branches of GPT-2 / Llama decoder layers (``hf_decoder_layers``) and of ViT
encoder layers (``hf_vit_layers``), GPT-2's ``Conv1D`` with LayerScale (``scaled_conv1d``), the config mark of a
model holding γ (``hf_layerscale_config``), and loading a saved one with its γ (``hf_loader``)."""
