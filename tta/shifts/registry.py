"""The shift registry: every video and text shift by name, with its severities and kind.

A video shift is ``fn(frames: uint8 (T, H, W, 3), severity: int, generator: torch.Generator, **options) -> uint8``;
its ``group`` says which frames it receives (docs/shifts/mlvp.md: frames): ``"A"`` = the sampled native-resolution frames
of the clip (the frame cache's output), ``"B"`` = every decoded frame of the video file (the shift works on the
whole video; the pipeline applies the uniform frame rule to what it returns, so a shift that already returns the
clip's frames, e.g. temporal scrambling, passes through unchanged). A group-B shift registered with
``accepts_sampled=True`` (the flow blurs) may instead be called with the clip's uniform frames alone
(``ShiftContext.sampled``), and then raises ``WholeVideoNeeded`` if its stored motion is missing.
a text shift is ``fn(text: str, severity: int, rng: random.Random, **options) -> str``. Shift modules register
themselves with :func:`register_video_shift` / :func:`register_text_shift` when :mod:`tta.shifts` is imported.

A video shift may also have a vectorised torch twin (:func:`register_batched`):
``twin(frames: uint8 (N, T, H, W, 3), severity, generators: list[torch.Generator], **options)`` on the frames' device,
drawing each video's randomness from its own generator exactly as the reference does. ``exact`` says whether the twin
is bit-identical to the reference on the CPU; :func:`tta.shifts.perturb_video` uses a twin on CUDA, and on the CPU
only when it is exact and registered with ``cpu=True`` (``cpu=False``: the reference is the faster CPU path, e.g.
libjpeg against the tensor JPEG; docs/shifts/mlvp.md, "Speed").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass


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


_VIDEO: dict[str, ShiftInfo] = {}
_TEXT: dict[str, ShiftInfo] = {}


def register_video_shift(name: str, severities=(1, 2, 3, 4, 5), level: str = "low", changes_length: bool = False,
                         group: str = "A", accepts_sampled: bool = False):
    if group not in ("A", "B"):
        raise ValueError(f"group must be 'A' (sampled frames) or 'B' (whole video), got {group!r}")
    if accepts_sampled and group != "B":
        raise ValueError("accepts_sampled is for group-B shifts: group A always gets the uniform frames")

    def wrap(fn):
        _VIDEO[name] = ShiftInfo(name, "video", fn, tuple(severities), level, changes_length, group,
                                 accepts_sampled=accepts_sampled)
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


def register_text_shift(name: str, severities=(1,), level: str = "character"):
    def wrap(fn):
        _TEXT[name] = ShiftInfo(name, "text", fn, tuple(severities), level)
        return fn

    return wrap


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
    """Run the check the shift ``name`` registered (:func:`register_check`), if any, on its options."""
    if (check := _CHECKS.get(name)) is not None:
        check(options)


def video_names() -> list[str]:
    return list(_VIDEO)


def text_names() -> list[str]:
    return list(_TEXT)


# ---------------------------------------------------------------------------------------------------------------
# What a run actually executes (results.json "shift_implementation")

#: approximate shift -> (the faithful shift it stands in for, what differs)
APPROXIMATIONS: dict[str, tuple[str, str]] = {
    "style_transfer_approx": ("style_transfer", "per-channel Lab mean/std transfer of a style image blended by alpha "
                              "(spec/mlvp.md 5.3), not AdaIN: it moves colour statistics only, no texture"),
    "snow_approx": ("snow", "the snow curtain is motion-blurred by the tap-sum approximation of imagecorruptions "
                    "instead of ImageMagick's MotionBlur (same curtain and angle as snow; <= 1 grey level apart)"),
    "back_translation_approx": ("back_translation", "rule-based paraphrase (progressive -> simple present, a fixed "
                                "lexicon, sentence case), not en->de->en machine translation"),
    "formal_approx": ("formal", "rule-based casual->formal rewrite (contractions, lexicon, 'There is ...'), not "
                      "Styleformer"),
    "casual_approx": ("casual", "rule-based formal->casual rewrite (lower case, lexicon, contractions), not "
                      "Styleformer"),
    "passive_approx": ("passive", "rule-based active->passive voice change of 'NP V NP' clauses, not Styleformer"),
    "active_approx": ("active", "rule-based passive->active voice change of 'NP be V-pp by NP' clauses, not "
                      "Styleformer"),
    "frost_approx": ("frost", "ImageNet-C's frost blend with a procedural frost texture (seeded per video, scaled to "
                     "the per-channel statistics of ImageNet-C's photographs), not a crop of its frost photographs"),
}
#: faithful names whose implementation still departs from the reference in a documented way
DEVIATIONS: dict[str, str] = {
    "formal": "Styleformer re-ranks its candidates by an adequacy model; that re-ranking is not reproduced (the "
              "semantic filter picks the first candidate with cosine >= threshold)",
    "casual": "Styleformer re-ranks its candidates by an adequacy model; that re-ranking is not reproduced (the "
              "semantic filter picks the first candidate with cosine >= threshold)",
    "sun_flare": "Albumentations' RandomSunFlare recipe composited in float (no uint8 rounding per disc), with a source "
                 "radius relative to the frame and five severities of our own (Shirnin et al. give none)",
    "grayscale": "five blend levels towards grey are our own; severity 5 is Albumentations' ToGray",
    "downscale": "five factors are our own; severity 3 is Albumentations' Downscale default (scale 0.25)",
    "slang": "a shipped ~60-entry lexicon of common informal English, not NL-Augmenter's subset of the Dictionary of "
             "English Slang & Colloquialisms",
    "yoda": "rule-based clause flip on the offline POS tagger, not NL-Augmenter's parser-based Yoda transformation",
}
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
    from tta.shifts.video.mixed import MLVP_TYPES, is_mixed

    if is_mixed(name):
        if name == "mixed_severity":
            parts = {str(options.get("base")): dict(options.get("shift_options") or {})}
        else:
            per = dict(options.get("shift_options") or {})
            parts = {str(t): dict(per.get(t) or {}) for t in (options.get("types") or MLVP_TYPES)}
        comps = {t: implementation_record({"name": t, "severity": 1, "seed": seed, "options": o,
                                           "resources": resources}) for t, o in parts.items()}
        return {"name": name, "kind": "video", "faithful": all(c["faithful"] for c in comps.values()),
                "approximates": None, "note": None, "deviation": None,
                "options": {k: v for k, v in options.items() if k != "shift_options"}, "components": comps}
    info = get_shift(name)
    approx = APPROXIMATIONS.get(name)
    resolved = {**_defaults(info.fn), **options}
    out = {"name": name, "kind": info.kind, "level": info.level, "faithful": approx is None,
           "approximates": approx[0] if approx else None, "note": approx[1] if approx else None,
           "deviation": DEVIATIONS.get(name), "options": resolved}
    if info.kind == "video":
        _video_details(name, resolved, resources, out)
    else:
        _text_details(name, severity, seed, options, captions, out)
    return out


def _video_details(name: str, resolved: dict, resources: dict, out: dict) -> None:
    resolved.setdefault("apply_at", "native")
    check_options(name, resolved)
    if name == "snow":
        from tta.shifts.video.weather import _check_snow_blur

        blur = resolved.get("blur_impl", "imagemagick")
        _check_snow_blur("snow", blur)
        if blur == "imagemagick":
            resolved["imagemagick_version"] = ("ImageMagick 6 Q16 MotionBlurImage, NumPy (bit-identical to the "
                                               "library)")
        else:
            from wand.version import MAGICK_VERSION

            resolved["imagemagick_version"] = MAGICK_VERSION
    elif name == "style_transfer":
        from tta.shifts.video.style import ADAIN_MISSING

        if not resolved.get("weights_dir"):
            raise ValueError(ADAIN_MISSING)
    elif name == "style_transfer_approx":
        resolved["style_source"] = resolved.get("style_dir") or "procedural"
    elif name == "event_insertion":
        counts = resources.get("donor_query_source")
        out["donor_query_source"] = dict(counts) if counts is not None else None
        out["donor_query_optimistic"] = bool(counts and counts.get("ground_truth_caption"))


def _text_details(name: str, severity: int, seed: int, options: dict, captions, out: dict) -> None:
    from tta.shifts.text.core import perturb_text_detailed, requires_model

    if requires_model(name) and not options.get("model_path"):
        raise ValueError(f"the shift {name!r} runs a real model and needs shift.options.model_path (a local "
                         f"transformers checkpoint); without one run shift={name}_approx")
    out["changed_share"] = None
    if captions is None:
        return
    from tta.shifts import item_seed

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
