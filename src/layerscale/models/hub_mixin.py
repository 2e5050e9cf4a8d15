"""``save_pretrained`` / ``from_pretrained`` for our models, in the Hugging Face Hub layout.

A saved model is a folder (or a Hub repository) holding

* ``config.json``: every constructor argument at the top level, as ``huggingface_hub.PyTorchModelHubMixin``
  writes it, plus ``architecture`` (the class), ``library`` and ``format_version`` — enough to rebuild the model
  with no other input (the nested ``{"model_args": {...}}`` of format 1 is still read);
* ``model.safetensors``: the state dict (safetensors: no pickle, so loading never runs code);
* ``README.md``: a model card naming the residual method, the depth and the LayerScale ε.

The files and the methods are those of ``huggingface_hub.ModelHubMixin`` / ``PyTorchModelHubMixin``
(``save_pretrained(dir, push_to_hub=..., repo_id=...)``, ``from_pretrained(id, token=..., revision=...,
**model_kwargs)``, ``push_to_hub(repo_id, ...)``): a folder saved here loads with a ``PyTorchModelHubMixin`` class of
the same constructor and the other way round (tested). The mixin itself is not inherited: it would import
``huggingface_hub`` (≈ 0.1 s) with every ``import layerscale`` and make it a hard dependency of the model classes;
here ``huggingface_hub`` is imported only when the Hub is used. Saving and loading a local folder need only
``safetensors``; the Hub needs the ``hf`` extra, and a failure to reach it is one line naming the id.
"""

from __future__ import annotations

import inspect
import math
import os
from pathlib import Path
from typing import Any

import torch

from ..atomic_io import atomic_path, write_json_atomic, write_text_atomic
from ..checkpoint_io import check_safetensors_file
from ..paths import refuse_non_file
from ..untrusted_files import MAX_CONFIG_BYTES, UntrustedFileError, parse_json, read_regular_file
from ..weight_checks import check_loadable_weights
from .trunk_args import init_value_spellings
from .validation import check_fits_memory

__all__ = ["HubMixin", "CONFIG_NAME", "WEIGHTS_NAME", "MODEL_CARD_NAME"]

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
MODEL_CARD_NAME = "README.md"
_FORMAT_VERSION = 2  # 1: constructor arguments nested under "model_args"; 2: at the top level (ModelHubMixin)
#: config.json keys that are not constructor arguments: the format's own, and what depth surgery records
#: (layerscale.surgery: the operation done, and which blocks are new; read back by the trainer, not the model)
_METADATA_KEYS = ("architecture", "library", "format_version", "layerscale_surgery", "layerscale_new_blocks")


def _safetensors():
    try:
        import safetensors.torch
    except ImportError:
        raise ImportError("save_pretrained / from_pretrained need safetensors: "
                          "pip install 'torch-layerscale[hf]'") from None
    return safetensors.torch


def _json_ready(name: str, value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"constructor argument {name}={value!r} is not finite; config.json cannot hold it")
        return value
    if isinstance(value, (tuple, list)):
        return [_json_ready(name, v) for v in value]
    raise ValueError(f"constructor argument {name}={value!r} ({type(value).__name__}) cannot be written to "
                     f"config.json; pass it by name (a string) to save the model")


class HubMixin:
    """``save_pretrained(dir)`` and ``from_pretrained(dir_or_repo_id)`` for a model class whose constructor takes
    only JSON-able keyword arguments. The arguments a model was built with are recorded when it is created."""

    def __new__(cls, *args: Any, **kwargs: Any):
        instance = super().__new__(cls)
        try:
            bound = inspect.signature(cls.__init__).bind(None, *args, **kwargs)
        except TypeError:
            arguments: dict[str, Any] = {}  # the constructor itself will raise for these arguments
        else:
            bound.apply_defaults()
            arguments = {}
            for name, value in list(bound.arguments.items())[1:]:
                kind = bound.signature.parameters[name].kind
                if kind is inspect.Parameter.VAR_KEYWORD:  # a subclass's **kwargs: the arguments it passes on
                    arguments.update(value)
                elif kind is not inspect.Parameter.VAR_POSITIONAL or value:
                    arguments[name] = value
        instance.__dict__["_init_kwargs"] = arguments
        return instance

    # ---- configuration ----------------------------------------------------------------------------------------

    def hub_config(self) -> dict[str, Any]:
        """The constructor arguments that rebuild this model as it is now (a classifier reset with
        ``reset_classifier`` saves its new ``num_classes`` and ``global_pool``; timm's ``init_values`` is saved as ``init_value``)."""
        args = dict(self.__dict__.get("_init_kwargs", {}))
        if args.get("init_values") is not None:
            args["init_value"] = args["init_values"]
        if "init_values" in args:
            args["init_values"] = None
        for name in ("num_classes", "global_pool"):  # reset_classifier changes them
            if name in args and hasattr(self, name):
                args[name] = getattr(self, name)
        return {name: _json_ready(name, value) for name, value in args.items()}

    def _init_value_in_use(self) -> float | None:
        from ..layers.layer_scale import LayerScale, ScalarScale, HeadScale

        for module in self.modules():
            if isinstance(module, (LayerScale, ScalarScale, HeadScale)):
                return module.init_value
        return None

    def model_card(self) -> str:
        """The ``README.md`` written by :meth:`save_pretrained`: YAML metadata, then what the model is."""
        cls = type(self).__name__
        depth = getattr(self, "depth", None)
        extra = len(getattr(self, "blocks_token_only", ()))
        epsilon = self._init_value_in_use()
        residual = getattr(self, "residual", "?")
        params = sum(p.numel() for p in self.parameters())
        task = "text-generation" if hasattr(self, "vocab_size") else "image-classification"
        depth_text = f"{depth}" + (f" self-attention blocks + {extra} class-attention blocks" if extra else " blocks")
        eps_text = f"{epsilon:g}" if epsilon is not None else "none (this residual method has no LayerScale)"
        tags = list(dict.fromkeys(["layerscale", residual]))  # residual="layerscale" is one tag, not two
        # no "license:": the library's licence is not the licence of the user's weights; that is the user's to set
        return "\n".join([
            "---", "library_name: torch-layerscale", f"pipeline_tag: {task}", "tags:",
            *(f"- {tag}" for tag in tags),
            "---",
            "",
            f"# {cls} ({residual}, depth {depth})",
            "",
            f"A `{cls}` built with [torch-layerscale](https://pypi.org/project/torch-layerscale/).",
            "",
            f"- residual method: `{residual}`",
            f"- depth: {depth_text}",
            f"- width: {getattr(self, 'embed_dim', '?')}",
            f"- LayerScale ε (initial γ): {eps_text}",
            f"- parameters: {params:,}",
            "",
            "Load it with:",
            "",
            "```python",
            f"from layerscale import {cls}",
            f'model = {cls}.from_pretrained("PATH_OR_REPO_ID")',
            "```",
            "",
            "LayerScale: Touvron et al. 2021, *Going deeper with Image Transformers* (arXiv 2103.17239), eq. 1: "
            "`x ← x + γ ⊙ F(LN(x))`, γ a learnable per-channel scale initialised to ε.",
            "",
        ])

    # ---- save ---------------------------------------------------------------------------------------------------

    def _check_rebuildable(self, config: dict[str, Any]) -> None:
        """Refuse to save what :meth:`from_pretrained` could not load: the config must rebuild these keys."""
        with torch.device("meta"):
            fresh = type(self)(**config)
        expected = {k: tuple(v.shape) for k, v in fresh.state_dict().items()}
        actual = {k: tuple(v.shape) for k, v in self.state_dict().items()}
        if expected != actual:
            extra = sorted(set(actual) - set(expected))
            missing = sorted(set(expected) - set(actual))
            shapes = sorted(k for k in set(actual) & set(expected) if actual[k] != expected[k])
            raise ValueError(
                f"{type(self).__name__} was changed after it was built (e.g. by add_layerscale or fold_layerscale), "
                f"so its constructor arguments no longer rebuild it: extra keys {extra[:3]}, missing keys "
                f"{missing[:3]}, other shapes {shapes[:3]}; save its state_dict with layerscale.checkpoint_io instead")

    def save_pretrained(self, save_directory: str | os.PathLike, *, repo_id: str | None = None,
                        push_to_hub: bool = False, **push_to_hub_kwargs: Any) -> Path:
        """Write ``config.json``, ``model.safetensors`` and ``README.md`` into ``save_directory`` (created if
        needed; each file written atomically). Returns the folder. Raises ``ValueError`` when the model's
        constructor arguments no longer describe it (changed by surgery) or cannot be written as JSON. With
        ``push_to_hub=True`` the folder is then uploaded to ``repo_id`` (default: the folder's name) by
        :meth:`push_to_hub`, which takes ``push_to_hub_kwargs``."""
        st = _safetensors()
        if not isinstance(save_directory, (str, os.PathLike)):
            raise ValueError(f"save_pretrained expects a folder path, got {type(save_directory).__name__}")
        folder = Path(save_directory)
        if folder.exists() and not folder.is_dir():
            raise ValueError(f"save_pretrained: {folder} exists and is not a folder")
        config = self.hub_config()
        self._check_rebuildable(config)
        folder.mkdir(parents=True, exist_ok=True)
        with atomic_path(folder / WEIGHTS_NAME) as tmp:
            st.save_model(self, str(tmp), metadata={"format": "pt"})
        write_json_atomic(folder / CONFIG_NAME, {
            **config, "architecture": type(self).__name__, "library": "torch-layerscale",
            "format_version": _FORMAT_VERSION,
        })
        write_text_atomic(folder / MODEL_CARD_NAME, self.model_card())
        if push_to_hub:
            self._upload(folder, repo_id or folder.name, **push_to_hub_kwargs)
        return folder

    def push_to_hub(self, repo_id: str, *, commit_message: str = "Push model using torch-layerscale.",
                    private: bool | None = None, token: str | None = None, branch: str | None = None,
                    create_pr: bool | None = None) -> str:
        """Save the model into a temporary folder and upload it to the Hugging Face Hub repository ``repo_id``
        (created if needed), as ``huggingface_hub.ModelHubMixin.push_to_hub`` does; returns the commit URL. Needs
        the ``hf`` extra; a failure (offline, no access) is one line naming the repository."""
        import tempfile

        with tempfile.TemporaryDirectory() as folder:
            self.save_pretrained(folder)
            return self._upload(Path(folder), repo_id, commit_message=commit_message, private=private, token=token,
                                branch=branch, create_pr=create_pr)

    @staticmethod
    def _upload(folder: Path, repo_id: str, *, commit_message: str = "Push model using torch-layerscale.",
                private: bool | None = None, token: str | None = None, branch: str | None = None,
                create_pr: bool | None = None) -> str:
        try:
            from huggingface_hub import HfApi
        except ImportError:
            raise ImportError("push_to_hub needs huggingface_hub: pip install 'torch-layerscale[hf]'") from None
        api = HfApi(token=token)
        try:
            repo = api.create_repo(repo_id=repo_id, private=private, exist_ok=True)
            commit = api.upload_folder(repo_id=getattr(repo, "repo_id", repo_id), folder_path=folder,
                                       commit_message=commit_message, revision=branch, create_pr=create_pr)
        except Exception as exc:  # offline, no token, no access: one line naming the repository
            reason = " ".join(str(exc).split())[:200] or type(exc).__name__
            raise OSError(f"push_to_hub: could not upload to the Hugging Face Hub repo {repo_id!r} "
                          f"({type(exc).__name__}: {reason})") from None
        return str(commit)

    # ---- load ---------------------------------------------------------------------------------------------------

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: str | os.PathLike, *, revision: str | None = None,
                        cache_dir: str | os.PathLike | None = None, local_files_only: bool = False,
                        force_download: bool = False, token: str | bool | None = None,
                        map_location: str | torch.device = "cpu", strict: bool = True,
                        torch_dtype: torch.dtype | str | None = None, dtype: torch.dtype | str | None = None,
                        **model_kwargs: Any):
        """Rebuild a model saved by :meth:`save_pretrained` from a local folder or a Hugging Face Hub repo id.

        The folder's ``config.json`` must name this class or a class it derives from (``MyViT.from_pretrained``
        of a saved ``VisionTransformer``, for ``class MyViT(VisionTransformer)``, builds a ``MyViT``;
        ``VisionTransformer.from_pretrained`` of a saved ``CaiT`` is a ``ValueError``). ``model_kwargs`` override
        constructor arguments, as with ``huggingface_hub.ModelHubMixin`` (an unknown one is a ``ValueError``
        listing the allowed; ``layer_scale_init_value``, the Hugging Face configs' name, and ``init_values``,
        timm's, are other spellings of ``init_value``): with another
        ``num_classes`` the head is newly initialised and every other weight loaded; with another ``img_size`` the
        position embedding is resampled (:func:`~layerscale.models.pos_embed_resample.resample_pos_embed`); any
        other weight whose shape the overrides change is a ``ValueError`` naming it, as is ``config.json`` for a
        saved argument the class refuses (``"depth": "x"``) or a file that is no regular file (a FIFO). ``dtype``
        (transformers 5's name) or ``torch_dtype`` (``torch.float16``, ``"bfloat16"``, ...; ``"auto"``: the saved
        weights' dtype) casts the loaded model. A Hub id is downloaded with ``huggingface_hub`` (the ``hf``
        extra; honours ``HF_HUB_OFFLINE``, ``local_files_only``, ``token``, ``revision``); any failure to get it
        is one line naming the id. The model is returned in eval mode, as Hugging Face loaders do.
        """
        given = [_resolve_dtype(n, v) for n, v in (("dtype", dtype), ("torch_dtype", torch_dtype)) if v is not None]
        if len(given) == 2 and given[0] != given[1]:
            raise ValueError(f"dtype={dtype!r} and torch_dtype={torch_dtype!r} disagree; torch_dtype is the older "
                             f"name of dtype: pass one of them")
        dtype = given[0] if given else None
        folder, cache = _resolve_folder(pretrained_model_name_or_path, revision=revision, cache_dir=cache_dir,
                                        local_files_only=local_files_only, force_download=force_download, token=token)
        architecture, saved_args = _read_config(_folder_file(folder, CONFIG_NAME, cache))
        allowed = list(inspect.signature(cls.__init__).parameters)[1:]
        foreign = sorted(set(saved_args) - set(allowed))
        if architecture is None and foreign:
            raise ValueError(f"{folder / CONFIG_NAME}: not a {cls.__name__} config (no 'architecture', and keys "
                             f"{foreign[:5]} are not its constructor arguments)")
        architecture = architecture or cls.__name__
        lineage = [c.__name__ for c in cls.__mro__ if issubclass(c, HubMixin) and c is not HubMixin]
        if architecture not in lineage:
            raise ValueError(f"{folder / CONFIG_NAME} describes a {architecture}, not a {cls.__name__} (nor a class "
                             f"{cls.__name__} derives from); load it with {architecture}.from_pretrained")
        model_kwargs = init_value_spellings(model_kwargs)
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD
                        for p in inspect.signature(cls.__init__).parameters.values())
        unknown = [] if takes_any else sorted(set(model_kwargs) - set(allowed))
        if unknown:
            raise ValueError(f"from_pretrained: unknown constructor argument(s) {', '.join(unknown)} for "
                             f"{cls.__name__}; allowed: {', '.join(allowed)}")
        args = {**saved_args, **model_kwargs}
        try:  # a saved argument of the wrong type or range, or sizes beyond this machine's memory: name the file
            check_fits_memory(lambda: cls(**args), "its model", "loading it", 2, "the model and the file's tensors")
            model = cls(**args)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{folder / CONFIG_NAME}{' (with overrides)' if model_kwargs else ''}: {exc}") from None
        weights = _folder_file(folder, WEIGHTS_NAME, cache)
        refuse_non_file(weights, f"the {WEIGHTS_NAME} save_pretrained writes")  # a FIFO is named, never opened
        if not weights.is_file():
            raise FileNotFoundError(f"{weights}: missing; a saved model folder holds {CONFIG_NAME} and {WEIGHTS_NAME}")
        check_safetensors_file(weights)  # a cut or corrupt file is named, before safetensors reads it
        tensors = _safetensors().load_file(str(weights), device=str(map_location))
        new_head = model_kwargs.get("num_classes", saved_args.get("num_classes")) != saved_args.get("num_classes")
        tensors = _fit_overrides(model, tensors, weights, new_head=new_head)
        check_loadable_weights(tensors, model.state_dict(), str(weights))  # integer or NaN weights: refused
        missing, unexpected = model.load_state_dict(tensors, strict=False)
        if new_head:  # only a head asked to be new may be missing from the file: any other gap is refused
            missing = [k for k in missing if not k.startswith("head.")]
        if strict and (missing or unexpected):
            raise ValueError(f"{weights} does not fit the {cls.__name__} its config.json builds: missing keys "
                             f"{sorted(missing)[:5]}, unexpected keys {sorted(unexpected)[:5]}")
        if dtype == "auto":
            dtype = next((t.dtype for t in tensors.values() if t.is_floating_point()), None)
        if dtype is not None:
            model.to(dtype)
        return model.eval()


def _resolve_dtype(name: str, torch_dtype: torch.dtype | str | None) -> torch.dtype | str | None:
    """A floating ``torch.dtype`` (from itself or its name), ``"auto"`` or ``None``; anything else is one line."""
    if torch_dtype is None or torch_dtype == "auto":
        return torch_dtype
    dtype = getattr(torch, torch_dtype, None) if isinstance(torch_dtype, str) else torch_dtype
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"{name}={torch_dtype!r}: expected a floating torch.dtype or its name "
                         f"('float32', 'float16', 'bfloat16') or 'auto'")
    return dtype


def _fit_overrides(model: torch.nn.Module, tensors: dict[str, torch.Tensor], weights: Path,
                   new_head: bool) -> dict[str, torch.Tensor]:
    """``tensors`` made to fit a model built with overrides: a new head left out, ``pos_embed`` resampled to the
    model's grid; any other shape difference is a ``ValueError`` naming the key."""
    from .pos_embed_resample import resample_pos_embed

    own = model.state_dict()
    out = {}
    for key, value in tensors.items():
        if key.startswith("head.") and new_head:
            continue
        if key == "pos_embed" and key in own and own[key].shape != value.shape:
            grid = model.patch_embed.grid_size
            value = resample_pos_embed(value, (grid, grid), num_prefix_tokens=own[key].shape[1] -
                                       model.patch_embed.num_patches)
        if key in own and own[key].shape != value.shape:
            raise ValueError(f"{weights}: {key} has shape {tuple(value.shape)}, the model built with these "
                             f"overrides needs {tuple(own[key].shape)}")
        out[key] = value
    return out


def _read_config(path: Path) -> tuple[str, dict[str, Any]]:
    """``(architecture, constructor arguments)`` of a saved ``config.json`` (format 2, or 1 with ``model_args``)."""
    refuse_non_file(path, f"the {CONFIG_NAME} save_pretrained writes")  # a FIFO is named, never opened
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing; a saved model folder holds {CONFIG_NAME} and {WEIGHTS_NAME}")
    config = parse_json(read_regular_file(path, MAX_CONFIG_BYTES), str(path), finite=False)  # bounded, no link
    if not isinstance(config, dict) or not isinstance(config.get("architecture", ""), str):
        raise ValueError(f"{path}: not a torch-layerscale model config (expected the constructor arguments and "
                         f"'architecture'; written by save_pretrained)")
    if isinstance(config.get("model_args"), dict):  # format 1
        return config["architecture"], dict(config["model_args"])
    # without 'architecture': written by huggingface_hub's own mixin, for the class that loads it
    return config.get("architecture"), {k: v for k, v in config.items() if k not in _METADATA_KEYS}


def _folder_file(folder: Path, name: str, cache: Path | None) -> Path:
    """The path to read for ``folder / name``, never through a link: except in a Hugging Face Hub cache (``cache``,
    the repository's folder there), whose snapshot files are links into its blobs, followed only to inside it."""
    path = folder / name
    if not path.is_symlink():
        return path
    if cache is not None and cache.resolve() in path.resolve().parents:
        return path.resolve()
    outside = ", pointing out of the Hub cache" if cache is not None else ""
    raise UntrustedFileError(f"{path}: refused (a symbolic link inside the model folder{outside}); links are not "
                             "followed")


def _resolve_folder(name: str | os.PathLike, *, revision: str | None, cache_dir: str | os.PathLike | None,
                    local_files_only: bool, force_download: bool = False,
                    token: str | bool | None = None) -> tuple[Path, Path | None]:
    """``(folder, Hub cache folder of the repository or None for a local folder)``."""
    if not isinstance(name, (str, os.PathLike)):
        raise ValueError(f"from_pretrained expects a folder or a Hub repo id, got {type(name).__name__}")
    path = Path(name)
    if path.is_dir():
        return path, None
    text = str(name)
    if path.exists() or text.count("/") > 1 or text.startswith((".", "/", "~")) or os.sep in text.replace("/", ""):
        raise FileNotFoundError(f"{text}: not a folder written by save_pretrained")
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise ImportError(f"{text} is not a local folder; downloading it from the Hugging Face Hub needs "
                          f"huggingface_hub: pip install 'torch-layerscale[hf]'") from None
    try:
        downloaded = snapshot_download(repo_id=text, revision=revision, cache_dir=cache_dir,
                                       local_files_only=local_files_only, force_download=force_download, token=token,
                                       allow_patterns=[CONFIG_NAME, WEIGHTS_NAME, MODEL_CARD_NAME])
    except Exception as exc:  # offline, unknown repo, no access, bad id: all one line naming the id
        reason = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise FileNotFoundError(f"{text}: not a local folder, and the Hugging Face Hub repo could not be fetched "
                                f"({type(exc).__name__}: {reason})") from None
    return Path(downloaded), Path(downloaded).parent.parent  # snapshots/<revision> inside the repository's folder
