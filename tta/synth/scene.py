"""Scene specifications of the embedded benchmark and the caption grammar that describes them.

A :class:`Scene` fully determines a video (objects, motions, one temporal event, background) and is sampled
from a NumPy generator, so a dataset is a pure function of its seed. Captions come from a small grammar with
several templates and synonyms (:mod:`tta.synth.vocab`); two caption styles exist, one per domain:

* style ``a`` (``data=synth``) reads like MSR-VTT: lower case, "a ... and then ...";
* style ``b`` (``data=synth_b``) is terser and more descriptive ("clip of ...; later it ..."), so a model
  fine-tuned on one domain meets a query-and-gallery shift on the other (HAT-VTR Sec. 5.3, QGS).

``pretrain_caption`` describes appearance only (no motion, no event), like an image-text corpus; the
zero-shot model is trained on such pairs and never sees a video caption.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from tta.synth.vocab import (
    BACKGROUNDS_A,
    BACKGROUNDS_B,
    COLOURS,
    EVENTS,
    LINEAR_MOTIONS,
    MOTIONS,
    MOVING_ONLY_EVENTS,
    SHAPES,
    SIZES,
)


@dataclass
class ObjectSpec:
    """One object: appearance, trajectory and (for the main object) its event."""

    shape: str
    colour: str
    size: str
    motion: str
    x0: float  # start position as a fraction of width/height
    y0: float
    speed: float  # fraction of the frame width travelled over the clip
    event: str | None = None
    event_time: float = 0.5  # fraction of the clip at which the event happens
    event_colour: str | None = None
    phase: float = 0.0


@dataclass
class Scene:
    """A full video specification; ``objects[0]`` is the main object (it carries the event)."""

    style: str
    background: str
    bg_seed: int
    objects: list[ObjectSpec] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def _pick(rng: np.random.Generator, items):
    items = list(items)
    return items[int(rng.integers(len(items)))]


def _sample_object(rng: np.random.Generator, main: bool) -> ObjectSpec:
    motion = _pick(rng, MOTIONS) if main else _pick(rng, ("still", "still", "bounce", "circle", "left", "right"))
    obj = ObjectSpec(
        shape=_pick(rng, SHAPES),
        colour=_pick(rng, COLOURS),
        size=_pick(rng, SIZES),
        motion=motion,
        x0=float(rng.uniform(0.3, 0.7)),
        y0=float(rng.uniform(0.3, 0.7)),
        speed=float(rng.uniform(0.35, 0.55)),
        phase=float(rng.uniform(0, 2 * np.pi)),
    )
    if main:
        events = [e for e in EVENTS if motion != "still" or e not in MOVING_ONLY_EVENTS]
        if motion not in LINEAR_MOTIONS:
            events = [e for e in events if e != "reverse"]
        obj.event = _pick(rng, events)
        obj.event_time = float(rng.uniform(0.35, 0.65))
        if obj.event == "recolour":
            obj.event_colour = _pick(rng, [c for c in COLOURS if c != obj.colour])
    return obj


def sample_scene(rng: np.random.Generator, style: str = "a", p_second: float = 0.5) -> Scene:
    """Sample one scene. ``style`` selects the renderer/background family (``a`` or ``b``)."""
    backgrounds = BACKGROUNDS_A if style == "a" else BACKGROUNDS_B
    scene = Scene(style=style, background=_pick(rng, backgrounds), bg_seed=int(rng.integers(2**31 - 1)))
    scene.objects.append(_sample_object(rng, main=True))
    if rng.random() < p_second:
        second = _sample_object(rng, main=False)
        # keep the distractor visually distinct from the main object
        while second.shape == scene.objects[0].shape and second.colour == scene.objects[0].colour:
            second.colour = _pick(rng, COLOURS)
        scene.objects.append(second)
    return scene


def _noun_phrase(rng, obj: ObjectSpec, article: bool = True) -> str:
    size = _pick(rng, SIZES[obj.size][1])
    colour = _pick(rng, COLOURS[obj.colour][1])
    shape = _pick(rng, SHAPES[obj.shape])
    np_ = f"{size} {colour} {shape}" if rng.random() < 0.8 else f"{colour} {shape} of {obj.size} size"
    if not article:
        return np_
    return ("an " if np_[0] in "aeiou" else "a ") + np_


def _event_phrase(rng, obj: ObjectSpec) -> str:
    phrase = _pick(rng, EVENTS[obj.event])
    if obj.event_colour:
        phrase = phrase.format(colour=_pick(rng, COLOURS[obj.event_colour][1]))
    return phrase


def _bg_phrase(rng, scene: Scene) -> str:
    table = BACKGROUNDS_A if scene.style == "a" else BACKGROUNDS_B
    return _pick(rng, table[scene.background][1])


def caption(scene: Scene, rng: np.random.Generator, style: str | None = None) -> str:
    """One caption of ``scene`` in caption style ``style`` (defaults to the scene's style)."""
    style = style or scene.style
    main = scene.objects[0]
    subj = _noun_phrase(rng, main)
    motion = _pick(rng, MOTIONS[main.motion])
    event = _event_phrase(rng, main)
    bg = _bg_phrase(rng, scene)
    other = ""
    if len(scene.objects) > 1:
        o = scene.objects[1]
        other_motion = _pick(rng, MOTIONS[o.motion])
        other = _pick(rng, (f" while {_noun_phrase(rng, o)} {other_motion}",
                            f" next to {_noun_phrase(rng, o)}",
                            f" and {_noun_phrase(rng, o)} {other_motion}"))
    if style == "a":
        templates = (
            f"{subj} {motion} and then {event} {bg}{other}",
            f"{bg} {subj} {motion} before it {event}{other}",
            f"{subj} {bg} {motion} and later {event}{other}",
            f"there is {subj} that {motion} and {event} {bg}{other}",
            f"{subj} {motion}{other} then it {event} {bg}",
        )
    else:
        templates = (
            f"clip of {subj} {bg}; it {motion}, later it {event}.{other and ' Also' + other + '.'}",
            f"video showing {subj} that {motion}. Midway it {event}. Scene: {bg[3:] if bg.startswith('on ') else bg}.",
            f"In this clip, {subj} {motion} {bg} and eventually {event}.{other and ' Also' + other + '.'}",
            f"Footage: {subj}, {bg}, {motion}; then {event}.",
        )
    text = _pick(rng, templates)
    return " ".join(text.split())


def pretrain_caption(scene: Scene, rng: np.random.Generator) -> str:
    """An appearance-only caption (image-text pretraining corpus): objects and background, no motion/event."""
    main = scene.objects[0]
    parts = [_noun_phrase(rng, main)]
    if len(scene.objects) > 1:
        parts.append(_noun_phrase(rng, scene.objects[1]))
    objs = " and ".join(parts)
    bg = _bg_phrase(rng, scene)
    template = _pick(rng, ("a picture of {o} {b}", "{o} {b}", "an image showing {o} {b}", "photo of {o} {b}"))
    return template.format(o=objs, b=bg)


def object_label(obj: ObjectSpec) -> str:
    """Canonical label of an object for the main-objects metadata (e.g. ``"large red circle"``)."""
    return f"{obj.size} {obj.colour} {obj.shape}"
