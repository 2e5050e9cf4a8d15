"""Rename tables: how the state-dict keys of another code base map onto ours, in both directions.

A :class:`KeyFormat` is an explicit list of :class:`Rule` lines. A rule's patterns are key names with two
placeholders, ``{i}`` (a block index) and ``{p}`` (``weight`` or ``bias``); a rule whose ``external`` side lists
several patterns maps their tensors, concatenated along dimension 0 in that order, onto one of ours (Hugging Face's
separate query/key/value linears onto our packed ``qkv``). Every key must be claimed by a rule (the first that
matches) or be listed as deliberately dropped (with the reason); anything else is an error naming the keys, never
a silent skip.
Our own keys (format ``"layerscale"``) are the canonical side of every table, so converting format A to format B
is A → ours → B.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable

import torch

from ..messages import shown_name, shown_names

__all__ = ["Rule", "Dropped", "KeyFormat", "ConversionReport", "format_keys", "unchanged"]

_PLACEHOLDERS = {"i": r"(?P<i>\d+)", "p": r"(?P<p>weight|bias)"}
#: our LayerScale keys, and the weight of the linear each one scales the output of
_SCALE_KEY = re.compile(r"(?P<block>.+)\.ls(?P<branch>[12])\.gamma")
_BRANCH_OUTPUT = {"1": "attn.proj.weight", "2": "mlp.fc2.weight"}
_TOKEN = re.compile(r"\{(\w+)\}")


def _compile(pattern: str) -> re.Pattern:
    parts, pos = [], 0
    for m in _TOKEN.finditer(pattern):
        if m.group(1) not in _PLACEHOLDERS:
            raise ValueError(f"unknown placeholder {m.group(0)} in key pattern {pattern!r}")
        parts.append(re.escape(pattern[pos:m.start()]))
        parts.append(_PLACEHOLDERS[m.group(1)])
        pos = m.end()
    parts.append(re.escape(pattern[pos:]))
    return re.compile("".join(parts))


def format_keys(keys, limit: int = 10) -> str:
    """``[a, b, c] (+N more)``: a short list of keys for a one-line error message, each escaped and capped
    (:func:`~layerscale.messages.shown_names`: a key from a file cannot forge a line or flood the terminal)."""
    return shown_names(keys, limit)


@dataclass(frozen=True)
class Rule:
    """One line of a rename table: ``external`` key(s) in the other format ↔ ``canonical`` key in ours.

    With several ``external`` patterns the canonical tensor is their concatenation along dim 0, in order.
    """

    external: str | tuple[str, ...]
    canonical: str

    @property
    def parts(self) -> tuple[str, ...]:
        return (self.external,) if isinstance(self.external, str) else tuple(self.external)

    def label(self, export: bool = False) -> str:
        """``external -> canonical`` (``canonical -> external`` when ``export``), or ``unchanged names``."""
        ext = self.parts[0] if len(self.parts) == 1 else _alternation(self.parts)
        if ext == self.canonical:
            return "unchanged names"
        return f"{self.canonical} -> {ext}" if export else f"{ext} -> {self.canonical}"

    def __post_init__(self) -> None:
        object.__setattr__(self, "_ext_re", tuple(_compile(p) for p in self.parts))
        object.__setattr__(self, "_can_re", _compile(self.canonical))

    def match_external(self, key: str) -> tuple[int, dict[str, str]] | None:
        """``(part index, placeholder values)`` if ``key`` is one of this rule's external keys."""
        for index, regex in enumerate(self._ext_re):
            m = regex.fullmatch(key)
            if m:
                return index, m.groupdict()
        return None

    def match_canonical(self, key: str) -> dict[str, str] | None:
        m = self._can_re.fullmatch(key)
        return m.groupdict() if m else None


def _alternation(parts: tuple[str, ...]) -> str:
    """``a.{q|k|v}.b`` for ``(a.q.b, a.k.b, a.v.b)``: several patterns written once for a report line."""
    prefix = os.path.commonprefix(parts)
    suffix = os.path.commonprefix([p[len(prefix):][::-1] for p in parts])[::-1]
    middles = [p[len(prefix):len(p) - len(suffix)] for p in parts]
    return f"{prefix}{{{'|'.join(middles)}}}{suffix}"


def unchanged(*patterns: str) -> tuple[Rule, ...]:
    """Rules for keys whose names are the same in both formats (still listed, so that nothing passes unchecked)."""
    return tuple(Rule(p, p) for p in patterns)


@dataclass(frozen=True)
class Dropped:
    """Keys matching ``pattern`` have no counterpart on the other side and are left out, for ``reason``."""

    pattern: str
    reason: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "_re", _compile(self.pattern))

    def matches(self, key: str) -> bool:
        return self._re.fullmatch(key) is not None


@dataclass
class ConversionReport:
    """What a conversion did: formats, tensors per rule, keys dropped or added (with reasons), other notes."""

    source: str
    target: str
    counts: dict[str, int] = field(default_factory=dict)
    dropped: list[tuple[str, str]] = field(default_factory=list)
    added: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Settings that change the computation but not the keys, and were not checked (no source model or config;
    #: see :mod:`layerscale.interop.settings`).
    unchecked: list[str] = field(default_factory=list)
    #: Keys of the model the checkpoint lacked, left at the model's own values (``strict=False`` only).
    kept: list[str] = field(default_factory=list)

    def count(self, label: str, n: int = 1) -> None:
        self.counts[label] = self.counts.get(label, 0) + n

    def lines(self) -> list[str]:
        """Human-readable summary, one item per line (the ``convert`` command prints it)."""
        out = [f"  {note}" for note in self.notes]
        width = max((len(label) for label in self.counts), default=0)
        for label, n in sorted(self.counts.items(), key=lambda kv: (kv[0] == "unchanged names", kv[0])):
            out.append(f"  {label:<{width}}  {n:6d}")
        for key, reason in self.dropped:
            out.append(f"  dropped {shown_name(key)}: {reason}")
        for key, reason in self.added:
            out.append(f"  added {shown_name(key)}: {reason}")
        if self.unchecked:
            out.append(f"  not checked (keys cannot show them; pass the source model or its config): "
                       f"{', '.join(self.unchecked)}")
        return out


StateDict = dict[str, torch.Tensor]


@dataclass(frozen=True)
class KeyFormat:
    """A foreign checkpoint layout: its rename table and the few things a table cannot say.

    ``legacy_rules`` are the names of older releases of the other library (``legacy_names`` says which), each
    standing for the rule of ``rules`` with the same canonical key. Import reads both. Export writes the names the
    target uses (:meth:`uses_legacy_names` of the target's keys, ``like``); without the target's keys, those of the
    installed library (``installed_keys()``, ``None`` when it is not installed: then the current names).
    ``import_drops`` / ``export_drops`` are keys with no counterpart on the other side. ``strip_prefixes`` are
    wrapper prefixes removed on import (``"dinov2."`` in task models). ``export_hook(state_dict, report)`` adds keys
    the other model needs that ours lacks; ``check(canonical_state_dict)`` raises ``ValueError`` for shapes the
    other model cannot take.
    """

    name: str
    description: str
    rules: tuple[Rule, ...]
    legacy_rules: tuple[Rule, ...] = ()
    legacy_names: str = "an older release"
    installed_keys: Callable[[], Iterable[str] | None] | None = None
    import_drops: tuple[Dropped, ...] = ()
    export_drops: tuple[Dropped, ...] = ()
    strip_prefixes: tuple[str, ...] = ()
    export_hook: Callable[[StateDict, ConversionReport], None] | None = None
    check: Callable[[StateDict], None] | None = None

    def __post_init__(self) -> None:
        current = {rule.canonical for rule in self.rules}
        orphans = [rule.canonical for rule in self.legacy_rules if rule.canonical not in current]
        if orphans:
            raise ValueError(f"{self.name}: legacy rules for {orphans} replace no current rule")

    # ---- which names ------------------------------------------------------------------------------------------
    def uses_legacy_names(self, keys: Iterable[str]) -> bool:
        """Whether ``keys`` (a model's or a checkpoint's, in this format) use the names of ``legacy_rules``.

        Keys that use both the legacy names and the current names they replace raise ``ValueError`` naming some
        of each: such a model has no single layout to write.
        """
        keys = [self._strip_key(k) for k in keys]
        replaced = {rule.canonical for rule in self.legacy_rules}
        current = [k for k in keys
                   if any(r.canonical in replaced and r.match_external(k) is not None for r in self.rules)]
        legacy = [k for k in keys if any(r.match_external(k) is not None for r in self.legacy_rules)]
        if current and legacy:
            raise ValueError(f"{self.name}: the keys mix the current names {format_keys(current, 2)} and those of "
                             f"{self.legacy_names} {format_keys(legacy, 2)}; no single layout to write")
        return bool(legacy)

    def _strip_key(self, key: str) -> str:
        for prefix in self.strip_prefixes:
            key = key.removeprefix(prefix)
        return key

    def _export_rules(self, legacy: bool) -> tuple[Rule, ...]:
        if not legacy:
            return self.rules
        by_canonical = {rule.canonical: rule for rule in self.legacy_rules}
        return tuple(by_canonical.get(rule.canonical, rule) for rule in self.rules)

    # ---- external -> ours -------------------------------------------------------------------------------------
    def to_canonical(self, state_dict: StateDict, report: ConversionReport) -> StateDict:
        """Rename ``state_dict`` from this format to ours; unclaimed keys raise ``ValueError`` listing them."""
        state_dict = self._strip(state_dict, report)
        out: StateDict = {}
        pending: dict[str, tuple[Rule, dict[int, torch.Tensor], dict[int, str]]] = {}
        unexpected = []
        for key, tensor in state_dict.items():
            hit = self._find_external(key)
            if hit is None:
                reason = next((d.reason for d in self.import_drops if d.matches(key)), None)
                if reason is None:
                    unexpected.append(key)
                else:
                    report.dropped.append((key, reason))
                continue
            rule, index, values = hit
            target = rule.canonical.format(**values)
            if len(rule.parts) == 1:
                self._put(out, target, tensor, key)
                report.count(rule.label())
            else:
                _, tensors, names = pending.setdefault(target, (rule, {}, {}))
                tensors[index], names[index] = tensor, key
        if unexpected:
            raise ValueError(f"{len(unexpected)} key(s) have no counterpart in the layerscale format "
                             f"(source format {self.name}): {format_keys(unexpected)}")
        for target, (rule, tensors, names) in pending.items():
            missing = [i for i in range(len(rule.parts)) if i not in tensors]
            if missing:
                have = format_keys(names.values())
                raise ValueError(f"{self.name}: {have} map to {target} but its other part(s) "
                                 f"{[rule.parts[i] for i in missing]} are missing")
            parts = [tensors[i] for i in range(len(rule.parts))]
            if len({tuple(t.shape[1:]) for t in parts}) != 1:
                shapes = {names[i]: tuple(tensors[i].shape) for i in sorted(tensors)}
                raise ValueError(f"{self.name}: cannot concatenate into {target}, shapes differ: {shapes}")
            self._put(out, target, torch.cat(parts, dim=0), ", ".join(names[i] for i in sorted(names)))
            report.count(rule.label(), len(parts))
        return out

    def _strip(self, state_dict: StateDict, report: ConversionReport) -> StateDict:
        for prefix in self.strip_prefixes:
            if any(k.startswith(prefix) for k in state_dict):
                state_dict = {k.removeprefix(prefix): v for k, v in state_dict.items()}
                report.notes.append(f"prefix {prefix!r} stripped")
        return state_dict

    def _find_external(self, key: str) -> tuple[Rule, int, dict[str, str]] | None:
        for rule in self.rules + self.legacy_rules:
            hit = rule.match_external(key)
            if hit is not None:
                return rule, hit[0], hit[1]
        return None

    @staticmethod
    def _put(out: StateDict, key: str, tensor: torch.Tensor, source: str) -> None:
        if key in out:
            raise ValueError(f"two source keys map to {shown_name(key)} (the second from {shown_name(source)}); the "
                             "checkpoint mixes "
                             f"naming conventions")
        out[key] = tensor

    # ---- ours -> external -------------------------------------------------------------------------------------
    def _check_per_channel_scales(self, state_dict: StateDict) -> None:
        """``ValueError`` for a scale ``...ls{1,2}.gamma`` that is not one value per channel of its branch's output
        (a scalar scale, ``residual="scalar"`` and the like, has shape ``(1,)``): every format's slot for it is
        per-channel, and a target library would refuse a ``(1,)`` tensor there at its strict load, or read it
        broadcast as another parameter. Never broadcast to fit: folding keeps the function exactly."""
        for key, tensor in state_dict.items():
            found = _SCALE_KEY.fullmatch(key)
            if found is None:
                continue
            output = state_dict.get(f"{found['block']}.{_BRANCH_OUTPUT[found['branch']]}")
            width = output.shape[0] if isinstance(output, torch.Tensor) and output.dim() == 2 else None
            if tensor.dim() != 1 or (width is not None and tensor.shape[0] != width):
                expected = f"({width},)" if width is not None else "(width,)"
                raise ValueError(f"{shown_name(key)} has shape {tuple(tensor.shape)}; the {self.name} format holds a "
                                 f"per-channel scale of shape {expected} there; fold the scales into their linears "
                                 f"first (layerscale fold: the same function, no scale keys left)")

    def from_canonical(self, state_dict: StateDict, report: ConversionReport,
                       like: Iterable[str] | None = None) -> StateDict:
        """Rename our ``state_dict`` into this format; keys this format has no slot for raise ``ValueError``.

        ``like``: the keys of the model the result is for; the names they use (current or ``legacy_rules``) are
        written. ``None``: the installed library's (``installed_keys``), else the current names.
        """
        if self.check is not None:
            self.check(state_dict)
        self._check_per_channel_scales(state_dict)
        if like is None and self.legacy_rules and self.installed_keys is not None:
            like = self.installed_keys()
        legacy = like is not None and self.uses_legacy_names(like)
        if legacy:
            report.notes.append(f"written in the key names of {self.legacy_names}, which the target uses")
        rules = self._export_rules(legacy)
        out: StateDict = {}
        unexpected = []
        for key, tensor in state_dict.items():
            hit = next(((r, v) for r in rules if (v := r.match_canonical(key)) is not None), None)
            if hit is None:
                reason = next((d.reason for d in self.export_drops if d.matches(key)), None)
                if reason is None:
                    unexpected.append(key)
                else:
                    report.dropped.append((key, reason))
                continue
            rule, values = hit
            names = [p.format(**values) for p in rule.parts]
            if len(names) == 1:
                self._put(out, names[0], tensor, key)
            else:
                if tensor.shape[0] % len(names):
                    raise ValueError(f"cannot split {shown_name(key)} of shape {tuple(tensor.shape)} into "
                                     f"{len(names)} equal parts for {self.name}")
                for name, part in zip(names, tensor.chunk(len(names), dim=0), strict=True):
                    self._put(out, name, part, key)
            report.count(rule.label(export=True), len(names))
        if unexpected:
            raise ValueError(f"{len(unexpected)} key(s) have no slot in the {self.name} format: "
                             f"{format_keys(unexpected)}")
        if self.export_hook is not None:
            self.export_hook(out, report)
        return out
