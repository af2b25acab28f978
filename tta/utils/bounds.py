"""Bounds of numeric options, declared once by the option's owner and checked by one routine.

An owner is an option dataclass deriving from :class:`Options`: a field declared ``x: float = bound(POSITIVE, 1.0)``
is checked when the dataclass is built, and the same declaration is what the up-front check of a run
(tta/utils/config_rules.py) applies to the config keys of the owner, found from the ``_target_`` of the config node.
A class that takes its options as keyword arguments (an adapter, a score refiner) names its option dataclasses in
``option_types``; each dataclass's ``block`` says where its keys sit below the class's node (``hsm`` ->
``adapter.method.hsm.*``). Both paths raise the same :class:`ConfigValueError` line naming key, value and range.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from typing import Any, ClassVar

INF = math.inf
BOUND = "bound"  # the field-metadata key
ITEMS = "bound_items"  # the field-metadata key of the rules of named items of a mapping field


class ConfigValueError(ValueError):
    """A configured value outside what its key accepts (a user error: one line, exit code 2)."""


@dataclass(frozen=True)
class Num:
    """A finite number in [lo, hi] (open ends with ``lo_open`` / ``hi_open``), integer when ``integer``; ``null``
    accepted when ``null`` says what it means; ``words`` are string values also accepted."""

    lo: float = -INF
    hi: float = INF
    integer: bool = False
    lo_open: bool = False
    hi_open: bool = False
    null: str | None = None
    words: tuple[str, ...] = ()

    def accepts(self, value: Any) -> bool:
        if value is None:
            return self.null is not None
        if isinstance(value, str):
            return value in self.words
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return False
        if self.integer and not float(value).is_integer():
            return False
        low_ok = value > self.lo if self.lo_open else value >= self.lo
        high_ok = value < self.hi if self.hi_open else value <= self.hi
        return low_ok and high_ok

    def describe(self) -> str:
        kind = "an integer" if self.integer else "a finite number"
        bounds = []
        lo, hi = _num(self.lo), _num(self.hi)
        if self.lo > -INF:
            bounds.append(f"{'>' if self.lo_open else '>='} {lo}")
        if self.hi < INF:
            bounds.append(f"{'<' if self.hi_open else '<='} {hi}")
        text = f"{kind} {' and '.join(bounds)}".rstrip()
        if self.lo > -INF and self.hi < INF:
            text = f"{kind} in {'(' if self.lo_open else '['}{lo}, {hi}{')' if self.hi_open else ']'}"
        extras = [repr(w) for w in self.words] + ([f"null ({self.null})"] if self.null is not None else [])
        return text + (f", or {' or '.join(extras)}" if extras else "")


def _num(x: float) -> str:
    return str(int(x)) if math.isfinite(x) and float(x).is_integer() else f"{x:g}"


def Int(lo: float = 0, hi: float = INF, **kw) -> Num:  # noqa: N802 - reads as a type where bounds are declared
    return Num(lo, hi, integer=True, **kw)


def Real(lo: float = -INF, hi: float = INF, **kw) -> Num:  # noqa: N802
    return Num(lo, hi, **kw)


POSITIVE = Real(0, lo_open=True)
NON_NEGATIVE = Real(0)
UNIT = Real(0, 1)  # a share, a probability, a mixing weight
SEED = Int(0, 2**32 - 1)


def bound(rule: Num, default: Any = MISSING, *, default_factory: Any = MISSING,
          items: Mapping[str, Num] | None = None) -> Any:
    """A dataclass field whose value must satisfy ``rule``; a mapping or a list satisfies it item by item, a mapping's
    items named in ``items`` their own rule instead."""
    return field(default=default, default_factory=default_factory, metadata={BOUND: rule, ITEMS: dict(items or {})})


def _field_rules(f: Any) -> dict[str, Num]:
    """The rules of a bound field: its own, then those of its named items (``vision.mlp_ratio``)."""
    return {f.name: f.metadata[BOUND], **{f"{f.name}.{k}": r for k, r in f.metadata.get(ITEMS, {}).items()}}


def show(value: Any) -> str:
    if value is None:
        return "null"
    return repr(value) if isinstance(value, str) else str(value)


def check_value(key: str, value: Any, rule: Num) -> None:
    """Raise ConfigValueError unless ``value`` (each item of a mapping as ``key.item``, of a list as ``key[]``)
    satisfies ``rule``."""
    if isinstance(value, Mapping):  # a dict, or a DictConfig passed on by Hydra
        for k, v in value.items():
            check_value(f"{key}.{k}", v, rule)
    elif isinstance(value, Sequence) and not isinstance(value, str):
        for v in value:
            check_value(f"{key}[]", v, rule)
    elif not rule.accepts(value):
        raise ConfigValueError(f"invalid value {key}={show(value)}: expected {rule.describe()}")


class Options:
    """Base of an option dataclass: its :func:`bound` fields are checked when it is built (a subclass with its own
    ``__post_init__`` calls ``super().__post_init__()`` first)."""

    #: where the keys of this block sit below its owner's config node ("" = the node itself)
    block: ClassVar[str] = ""

    def __post_init__(self) -> None:
        prefix = f"{self.block}." if self.block else ""
        for f in fields(self):
            if BOUND not in f.metadata:
                continue
            value, items = getattr(self, f.name), f.metadata.get(ITEMS, {})
            if items and isinstance(value, Mapping):
                for k, v in value.items():
                    check_value(f"{prefix}{f.name}.{k}", v, items.get(k, f.metadata[BOUND]))
            else:
                check_value(prefix + f.name, value, f.metadata[BOUND])


def declared_bounds(owner: Any) -> dict[str, Num]:
    """The bounds ``owner`` declares, keyed by the dotted option key below its config node: the bound fields of an
    option dataclass, or of each dataclass in a class's ``option_types`` (collected over its bases)."""
    if isinstance(owner, type) and is_dataclass(owner):
        prefix = f"{owner.block}." if getattr(owner, "block", "") else ""
        return {prefix + key: rule for f in fields(owner) if BOUND in f.metadata for key, rule in _field_rules(f).items()}
    out: dict[str, Num] = {}
    for cls in reversed(getattr(owner, "__mro__", ())):
        for options in vars(cls).get("option_types", ()):
            out.update(declared_bounds(options))
    return out
