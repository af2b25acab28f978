"""The shift registry: every video and text shift by name, with its severities and kind.

A video shift is ``fn(frames: uint8 (T, H, W, 3), severity: int, generator: torch.Generator, **options) -> uint8``;
its ``group`` says which frames it receives (docs/shifts/mlvp.md: frames): ``"A"`` = the sampled native-resolution frames
of the clip (the frame cache's output), ``"B"`` = every decoded frame of the video file (the shift works on the
whole video; the pipeline applies the uniform frame rule to what it returns, so a shift that already returns the
clip's frames, e.g. temporal scrambling, passes through unchanged). A group-B shift registered with
``accepts_sampled=True`` (the flow blurs) may instead be called with the clip's uniform frames alone
(``ShiftContext.sampled``), and then raises ``WholeVideoNeeded`` if its stored motion is missing.
a text shift is ``fn(text: str, severity: int, rng: random.Random, **options) -> str``. Shift modules register
themselves with :func:`register_video_shift` / :func:`register_text_shift` when :mod:`tta.shifts` is imported, and
declare there what they are (:class:`Implementation`), their option check, the bounds of their numeric options
(``bounds={"ratio": Real(0, 1, lo_open=True)}``, tta/utils/bounds.py; the run's up-front check applies them to
``shift.options.*``) and the extra fields of their record; this module names no shift and imports none.

A video shift may also have a vectorised torch twin (:func:`register_batched`):
``twin(frames: uint8 (N, T, H, W, 3), severity, generators: list[torch.Generator], **options)`` on the frames' device,
drawing each video's randomness from its own generator exactly as the reference does. ``exact`` says whether the twin
is bit-identical to the reference on the CPU; :func:`tta.shifts.perturb_video` uses a twin on CUDA, and on the CPU
only when it is exact and registered with ``cpu=True`` (``cpu=False``: the reference is the faster CPU path, e.g.
libjpeg against the tensor JPEG; docs/shifts/mlvp.md, "Speed").
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tta.utils.bounds import Num, check_value
from tta.utils.seeding import derive_seed


@dataclass(frozen=True)
class Implementation:
    """What a registered shift is, declared where it is defined: faithful to its reference, an approximation of
    another shift (``approximates`` + ``note``), or faithful by name with a documented ``deviation``."""

    approximates: str | None = None  # the faithful shift this one stands in for
    note: str | None = None  # what differs from it
    deviation: str | None = None  # a faithful name's documented departure from the reference

    def __post_init__(self):
        if (self.approximates is None) != (self.note is None):
            raise ValueError("an approximation names the shift it approximates and what differs (both or neither)")

    @property
    def faithful(self) -> bool:
        return self.approximates is None


FAITHFUL = Implementation()


@dataclass(frozen=True)
class ShiftInfo:
    name: str
    kind: str  # "video" | "text"
    fn: Callable
    severities: tuple[int, ...]
    level: str  # MLVP low/mid/high, or character/word/sentence
    changes_length: bool = False
    group: str = "A"  # MLVP processing group: "A" sampled frames, "B" the whole decoded video
    batched: Callable | None = None  # the vectorised torch twin (register_batched), if any
    batched_exact: bool = False  # the twin is bit-identical to fn on the CPU
    batched_cpu: bool = True  # backend=auto may pick the (exact) twin on the CPU: it is not slower there
    accepts_sampled: bool = False  # group B: may run from the uniform frames when its motion is stored
    implementation: Implementation = FAITHFUL
    record: Callable[[dict, dict], dict] | None = None  # (resolved options, run resources) -> extra record fields
    seed_as: str | None = None  # draw randomness under this shift's name (items comparable one by one)
    detailed: Callable | None = None  # text: fn(text, severity, rng, **options) -> outcome with the filter's record
    needs_model: bool = False  # text: runs only with shift.options.model_path
    bounds: Mapping[str, Num] | None = None  # option -> the values it accepts (tta/utils/bounds.py)

    @property
    def description(self) -> str:
        """The first line of the shift function's docstring."""
        doc = (getattr(self.fn, "__doc__", None) or "").strip()
        return doc.splitlines()[0] if doc else ""


_VIDEO: dict[str, ShiftInfo] = {}
_TEXT: dict[str, ShiftInfo] = {}
#: streams made of registered shifts (mixed MLVP streams): name -> options -> {component shift: its options}
_COMPOSITES: dict[str, Callable[[dict], dict[str, dict]]] = {}
_COMPOSITE_BOUNDS: dict[str, Mapping[str, Num]] = {}


def _implementation(approximates, note, deviation) -> Implementation:
    return Implementation(approximates, note, deviation) if approximates or note or deviation else FAITHFUL


def register_video_shift(name: str, severities=(1, 2, 3, 4, 5), level: str = "low", changes_length: bool = False,
                         group: str = "A", accepts_sampled: bool = False, *, approximates: str | None = None,
                         note: str | None = None, deviation: str | None = None, record: Callable | None = None,
                         seed_as: str | None = None, bounds: Mapping[str, Num] | None = None):
    """Register ``fn`` as the video shift ``name`` with what it is (``approximates``/``note``/``deviation``), the
    extra fields of its implementation ``record`` and the ``bounds`` of its numeric options (see :class:`ShiftInfo`);
    a check of its options beyond bounds: :func:`register_check`."""
    if group not in ("A", "B"):
        raise ValueError(f"group must be 'A' (sampled frames) or 'B' (whole video), got {group!r}")
    if accepts_sampled and group != "B":
        raise ValueError("accepts_sampled is for group-B shifts: group A always gets the uniform frames")

    def wrap(fn):
        _VIDEO[name] = ShiftInfo(name, "video", fn, tuple(severities), level, changes_length, group,
                                 accepts_sampled=accepts_sampled,
                                 implementation=_implementation(approximates, note, deviation), record=record,
                                 seed_as=seed_as, bounds=bounds)
        return fn

    return wrap


def register_batched(name: str, exact: bool, cpu: bool = True):
    """Attach a vectorised torch twin to the already registered video shift ``name`` (see the module docstring)."""
    def wrap(fn):
        if name not in _VIDEO:
            raise KeyError(f"register {name!r} with register_video_shift before its batched twin")
        _VIDEO[name] = dataclasses.replace(_VIDEO[name], batched=fn, batched_exact=exact, batched_cpu=cpu)
        return fn

    return wrap


def register_text_shift(name: str, severities=(1,), level: str = "character", *, detailed: Callable | None = None,
                        needs_model: bool = False, approximates: str | None = None, note: str | None = None,
                        deviation: str | None = None, seed_as: str | None = None,
                        bounds: Mapping[str, Num] | None = None):
    """Register ``fn(text, severity, rng, **options) -> str`` as the text shift ``name``; ``detailed`` is the same
    shift returning its outcome record (:class:`tta.shifts.text.core.TextOutcome`); ``bounds`` as for video."""
    def wrap(fn):
        _TEXT[name] = ShiftInfo(name, "text", fn, tuple(severities), level, detailed=detailed,
                                needs_model=needs_model, implementation=_implementation(approximates, note, deviation),
                                seed_as=seed_as, bounds=bounds)
        return fn

    return wrap


def register_composite(name: str, components: Callable[[dict], dict[str, dict]],
                       bounds: Mapping[str, Num] | None = None) -> None:
    """Register a stream made of registered shifts; ``components(options)`` -> {shift: its options}; ``bounds`` of
    its own numeric options."""
    _COMPOSITES[name] = components
    _COMPOSITE_BOUNDS[name] = dict(bounds or {})


def option_bounds(name: str) -> dict[str, Num]:
    """The bounds the shift or composite stream ``name`` declared for its options ({} for any other name)."""
    if name in _COMPOSITE_BOUNDS:
        return dict(_COMPOSITE_BOUNDS[name])
    info = _VIDEO.get(name) or _TEXT.get(name)
    return dict(info.bounds or {}) if info is not None else {}


def get_shift(name: str) -> ShiftInfo:
    if name in _VIDEO:
        return _VIDEO[name]
    if name in _TEXT:
        return _TEXT[name]
    raise KeyError(f"unknown shift {name!r}; video shifts: {sorted(_VIDEO)}; text shifts: {sorted(_TEXT)}")


def check_severity(info: ShiftInfo, severity: int) -> int:
    if int(severity) not in info.severities:
        raise ValueError(f"severity {severity} is out of range for shift {info.name!r}; valid severities: "
                         f"{list(info.severities)}")
    return int(severity)


_CHECKS: dict[str, Callable[[dict], None]] = {}


def register_check(*names: str):
    """Register ``check(options)`` for the shifts ``names``: it raises a one-line ValueError / FileNotFoundError for
    options that cannot work (a missing weights file, a model path that is not set), so a run refuses them before
    any stage, not from inside a loader worker after the gallery is encoded."""
    def wrap(fn: Callable[[dict], None]):
        for name in names:
            _CHECKS[name] = fn
        return fn

    return wrap


def check_options(name: str, options: dict) -> None:
    """Run the check the shift ``name`` registered (:func:`register_check`), if any, then :func:`check_bounds`."""
    if (check := _CHECKS.get(name)) is not None:
        check(options)
    check_bounds(name, options)


def check_bounds(name: str, options: dict) -> None:
    """Raise ConfigValueError for the first option of the shift ``name`` outside the bound it declared."""
    for key, rule in option_bounds(name).items():
        if key in options:
            check_value(f"options.{key}", options[key], rule)


def item_seed(base_seed: int, item_id: str, shift: str, severity: int) -> int:
    """Seed of one item under one shift: SHA-256 of ``"{base_seed}/{item_id}/{shift}/{severity}"``, where ``shift``
    is the name the shift draws under (``seed_as``)."""
    info = _VIDEO.get(shift) or _TEXT.get(shift)
    return derive_seed(base_seed, item_id, (info.seed_as if info is not None else None) or shift, severity)


def perturb_text_detailed(text: str, name: str, severity: int, seed: int, **options):
    """Like :func:`tta.shifts.perturb_text` (same seed, same text) but returns the shift's outcome record."""
    info = get_shift(name)
    if info.kind != "text":
        raise ValueError(f"{name!r} is a {info.kind} shift, not a text shift")
    return info.detailed(text, check_severity(info, severity), random.Random(int(seed)), **options)


def requires_model(name: str) -> bool:
    """True for shifts that need ``model_path`` (a local translation / style model) to run."""
    return get_shift(name).needs_model


def video_names() -> list[str]:
    return list(_VIDEO)


def text_names() -> list[str]:
    return list(_TEXT)


# ---------------------------------------------------------------------------------------------------------------
# What a run actually executes (results.json "shift_implementation")

_NOT_OPTIONS = {"frames", "text", "severity", "generator", "rng", "context", "options"}


def _spec_fields(spec) -> tuple[str, int, int, dict, dict]:
    """(name, severity, seed, options, resources) of a ShiftSpec, a mapping or a Hydra shift config."""
    get = spec.get if isinstance(spec, Mapping) else (lambda k, d=None: getattr(spec, k, d))
    options = get("options", None) or {}
    if hasattr(options, "items"):
        try:
            from omegaconf import OmegaConf

            options = OmegaConf.to_container(options, resolve=True) if OmegaConf.is_config(options) else options
        except ImportError:  # pragma: no cover
            pass
    options = dict(options.items() if hasattr(options, "items") else options)
    seed = get("seed", None)
    return (str(get("name", "clean")), int(get("severity", 0) or 0), 42 if seed is None else int(seed), options,
            dict(get("resources", None) or {}))


def _defaults(fn: Callable) -> dict:
    import inspect

    fn = getattr(fn, "__wrapped_detailed__", fn)
    return {k: p.default for k, p in inspect.signature(fn).parameters.items()
            if k not in _NOT_OPTIONS and p.default is not inspect.Parameter.empty
            and p.kind is not inspect.Parameter.VAR_KEYWORD}


def implementation_record(spec, captions=None) -> dict:
    """What the shift of a run actually executes, for results.json under ``"shift_implementation"``.

    Args:
        spec: the run's shift — a :class:`tta.data.stream.ShiftSpec` (name, severity, seed, options, resources),
            or a mapping / Hydra ``cfg.shift`` with ``name``, ``severity``, ``options``.
        captions: for a text shift, the query captions as ``[(caption, caption_id), ...]`` (``caption_id`` as the
            stream seeds it: ``pair.caption_id or pair.video_id``); the record then carries ``changed_share``, the
            share of captions the shift actually changed (recomputed with the run's item seeds: identical
            outputs; cached in-process, so free when the stream ran in this process),
            ``changed_share_beyond_case`` (ignoring case and final punctuation) and ``filter_failed_share``.

    Returns:
        ``{"name", "kind", "level", "faithful", "approximates", "note", "deviation", "options", ...}``: ``name`` is
        the registered shift that ran; ``faithful`` is False for every approximation (``*_approx``);
        ``approximates`` names the faithful shift it stands in for; ``options`` are the resolved options
        (defaults filled in, e.g. ``snow``'s ``blur_impl`` and ``imagemagick_version``, ``apply_at``).
        ``event_insertion`` adds ``donor_query_source`` ({generated_caption, ground_truth_caption,
        video_embedding: count}) when the run's donor pool is in ``spec.resources``, and
        ``donor_query_optimistic`` (True when any query used a ground-truth caption). Mixed streams list their
        component shifts under ``components``; ``faithful`` is then True only if every component is.

    Raises:
        The shift's own one-line error when a faithful implementation cannot run here (``style_transfer`` without
        ``weights_dir``, ``snow`` with ``blur_impl=wand`` without ImageMagick, a model-based text shift without ``model_path``), so a
        runner that calls this before the stream fails early.
    """
    name, severity, seed, options, resources = _spec_fields(spec)
    if name == "clean":
        return {"name": "clean", "kind": "clean", "faithful": True, "approximates": None, "note": None,
                "deviation": None, "options": {}}
    if name in _COMPOSITES:
        comps = {t: implementation_record({"name": t, "severity": 1, "seed": seed, "options": o,
                                           "resources": resources}) for t, o in _COMPOSITES[name](options).items()}
        return {"name": name, "kind": "video", "faithful": all(c["faithful"] for c in comps.values()),
                "approximates": None, "note": None, "deviation": None,
                "options": {k: v for k, v in options.items() if k != "shift_options"}, "components": comps}
    info = get_shift(name)
    impl = info.implementation
    resolved = {**_defaults(info.fn), **options}
    out = {"name": name, "kind": info.kind, "level": info.level, "faithful": impl.faithful,
           "approximates": impl.approximates, "note": impl.note, "deviation": impl.deviation, "options": resolved}
    if info.kind == "video":
        resolved.setdefault("apply_at", "native")
        check_options(name, resolved)
    if info.record is not None:
        extra = dict(info.record(resolved, resources))
        resolved.update(extra.pop("options", {}))
        out.update(extra)
    if info.kind == "text":
        _text_details(info, severity, seed, options, captions, out)
    return out


def _text_details(info: ShiftInfo, severity: int, seed: int, options: dict, captions, out: dict) -> None:
    name = info.name
    if info.needs_model and not options.get("model_path"):
        raise ValueError(f"the shift {name!r} runs a real model and needs shift.options.model_path (a local "
                         f"transformers checkpoint); without one run shift={name}_approx")
    out["changed_share"] = None
    if captions is None:
        return
    captions = list(captions)
    outcomes = [perturb_text_detailed(c, name, severity, item_seed(seed, cid, name, severity), **options)
                for c, cid in captions]
    out["num_captions"] = len(outcomes)
    out["changed_share"] = sum(o.changed for o in outcomes) / len(outcomes) if outcomes else None

    def norm(t: str) -> str:
        return " ".join(t.lower().rstrip(" .!?").split())

    out["changed_share_beyond_case"] = (sum(norm(o.text) != norm(c) for o, (c, _) in zip(outcomes, captions,
                                                                                      strict=True)) / len(outcomes)
                                        if outcomes else None)
    filtered = [o for o in outcomes if o.cosine is not None]
    out["filter_failed_share"] = (sum(not o.passed for o in filtered) / len(filtered)) if filtered else None
