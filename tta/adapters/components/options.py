"""The one option idiom of the adapters: a typed dataclass per option block, built by :func:`build_options`.

An adapter's ``__init__`` keeps the keyword arguments users type (``adapter.method.<key>=...``; nested blocks such as
HAT-VTR's ``hsm:`` arrive as dicts) and turns each block into its dataclass; the dataclass validates its values in
``__post_init__``: its numeric ranges by the bounds declared on its fields (:mod:`tta.utils.bounds`, the same that
check a run's config before any work), its choices itself. A *preset* is a named set of overrides:

* ``presets`` + ``preset`` fill every option given as None (``preset: vtr_tta``; an explicit value always wins);
* ``force`` overrides whatever was given (HAT-VTR's ``strict_reproduction``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any


def plain(value) -> dict:
    """A plain dict from a dict, a DictConfig or None."""
    if value is None:
        return {}
    try:
        from omegaconf import DictConfig, OmegaConf

        if isinstance(value, DictConfig):
            return OmegaConf.to_container(value, resolve=True)
    except ImportError:  # pragma: no cover
        pass
    return dict(value)


def resolve_preset(table: Mapping[str, Mapping[str, Any]], preset: str, **explicit: Any) -> dict[str, Any]:
    """The preset's values with every explicitly given (non-None) option on top."""
    if preset not in table:
        raise ValueError(f"preset must be one of {tuple(table)}, got {preset!r}")
    out = dict(table[preset])
    unknown = set(explicit) - set(out)
    if unknown:
        raise KeyError(f"options {sorted(unknown)} are not in the preset table")
    out.update({k: v for k, v in explicit.items() if v is not None})
    return out


def build_options(cls, given=None, presets: Mapping[str, Mapping[str, Any]] | None = None,
                  preset: str | None = None, force: Mapping[str, Any] | None = None):
    """The dataclass ``cls`` from ``given`` (dict / DictConfig / instance / None; unknown keys are errors).

    Args:
        cls: the option block's dataclass.
        given: the values the user gave (missing keys take the dataclass defaults).
        presets: named override tables; with ``preset``, the chosen table fills every option given as None.
        preset: the name of the preset to apply.
        force: overrides applied last, whatever was given.
    """
    if isinstance(given, cls) and presets is None and force is None:
        return given
    values = dict(vars(given)) if isinstance(given, cls) else plain(given)
    names = {f.name for f in fields(cls)}
    unknown = set(values) - names
    if unknown:
        raise ValueError(f"unknown {cls.__name__} option(s) {sorted(unknown)}; valid: {sorted(names)}")
    if presets is not None:
        values.update(resolve_preset(presets, preset, **{k: values.get(k) for k in presets.get(preset, {})}))
    values.update(force or {})
    return cls(**values)


def check_choice(name: str, value: str, choices: tuple[str, ...]) -> str:
    """``value`` if it is one of ``choices``, else a ValueError naming the option."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value

