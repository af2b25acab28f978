"""``data=synth_comp``: embedded clips of 3-4 ordered events, for the VideoComp probes.

Each clip shows the main object of an embedded scene (no distractor, no single-frame event) performing one motion
per segment, ``frames_per_event`` frames each, the segments rendered back to back. Its caption names the object and
background, then the motions in order ("a big red ball on grass moves to the left, then rises, finally bounces"),
joined exactly as :func:`tta.comp.disrupt.join_events` joins the positive text, and ``events.json`` keeps every
caption's events (text, time span, action phrase, alternatives).

With ``recolour_events`` every segment also gives the object a colour of its own, a state that each of its frames
shows ("a big ball on grass turns red and moves to the left, then becomes blue and rises, ..."). It puts the order
of events in plain sight of an order-aware video head, to tell whether a reorder failure is the video side's or the
text side's (docs/results/videocomp-probe.md); it is off by default because the colours make segment mismatch
trivial (99.7 %) and so uninformative.

Motions come from distinct *visual classes*: a model that encodes frames independently sees the positions an
object visits but not their order, so "moves left" and "moves right" (likewise up and down) look alike to it.
Consecutive events never share a class, and an action replacement uses a motion of a class absent from the clip,
so a replaced action names something the video never shows.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from tta.comp.disrupt import join_events
from tta.synth.build import STYLE_GEOMETRY, SynthConfig, derive_rng, split_of, write_mp4
from tta.synth.render import render
from tta.synth.scene import Scene, _bg_phrase, _noun_phrase, _pick, object_label, sample_scene
from tta.synth.vocab import COLOURS, EVENTS, MOTIONS, SHAPES, SIZES
from tta.utils.bounds import Int, bound

# motions a frame-independent encoder cannot tell apart (the same positions visited in reverse order)
VISUAL_CLASS = {"left": "horizontal", "right": "horizontal", "up": "vertical", "down": "vertical"}


def visual_class(motion: str) -> str:
    return VISUAL_CLASS.get(motion, motion)


@dataclass(frozen=True)
class CompSynthConfig(SynthConfig):
    """A multi-event embedded dataset (``data=synth_comp``); the fields beyond :class:`SynthConfig` shape the clips."""

    name: str = "synth_comp"
    min_events: int = bound(Int(3), 3)  # seg-mismatch needs three events
    max_events: int = bound(Int(3), 4)
    frames_per_event: int = bound(Int(2), 16)
    recolour_events: bool = False
    version: int = 1
    KEY_DEFAULT_OFF: ClassVar[dict[str, Any]] = {"recolour_events": False}

    def make_video(self, i: int, root: Path) -> dict:
        rng = derive_rng(self.seed, self.name, i, "scene")
        scene = sample_scene(rng, style=self.style, p_second=0.0)
        motions = sample_motions(rng, int(rng.integers(self.min_events, self.max_events + 1)))
        colours = sample_colours(rng, scene.objects[0].colour, len(motions)) if self.recolour_events else None
        frames, boxes = render_events(scene, motions, self.frames_per_event, colours)
        path = root / "videos" / f"video{i}.mp4"
        if not path.exists():
            write_mp4(path, frames, STYLE_GEOMETRY[self.style]["fps"], self.crf)
        seconds = self.frames_per_event / STYLE_GEOMETRY[self.style]["fps"]
        cap_rng = derive_rng(self.seed, self.name, i, "caption")
        n_caps = self.captions_per_train_video if split_of(self, i) == "train" else 1
        described = [describe(scene, motions, seconds, cap_rng, colours) for _ in range(n_caps)]
        record_scene = {**scene.to_dict(), "motions": motions, **({"colours": colours} if colours else {})}
        return {"video_id": f"video{i}", "split": split_of(self, i), "scene": record_scene,
                "captions": [join_events([e["text"] for e in d["events"]], d["prefix"]) for d in described],
                "events": described, "boxes": boxes, "label": object_label(scene.objects[0]),
                "num_frames": int(frames.shape[0])}


def sample_motions(rng: np.random.Generator, n: int) -> list[str]:
    """``n`` motions, consecutive ones of different visual classes, no motion twice."""
    motions: list[str] = []
    while len(motions) < n:
        options = [m for m in MOTIONS if m not in motions
                   and (not motions or visual_class(m) != visual_class(motions[-1]))]
        motions.append(_pick(rng, options))
    return motions


def sample_colours(rng: np.random.Generator, first: str, n: int) -> list[str]:
    """``n`` distinct colours, the scene's own first: one per event."""
    colours = [first]
    while len(colours) < n:
        colours.append(_pick(rng, [c for c in COLOURS if c not in colours]))
    return colours


def render_events(scene: Scene, motions: list[str], frames_per_event: int,
                  colours: list[str] | None = None) -> tuple[np.ndarray, list]:
    """The clip: one segment per motion (the main object only, no event), ``frames_per_event`` frames each; with
    ``colours``, segment k shows the object in ``colours[k]``."""
    t_len = STYLE_GEOMETRY[scene.style]["frames"]
    only = [round(j * (t_len - 1) / max(1, frames_per_event - 1)) for j in range(frames_per_event)]
    frames, boxes = [], []
    for motion in motions:
        segment = copy.deepcopy(scene)
        main = segment.objects[0]
        main.motion, main.event, main.event_colour = motion, None, None
        if colours:
            main.colour = colours[len(frames)]
        seg_frames, seg_boxes = render(segment, only=only)
        frames.append(seg_frames)
        boxes += seg_boxes
    return np.concatenate(frames), boxes


def describe(scene: Scene, motions: list[str], seconds: float, rng: np.random.Generator,
             colours: list[str] | None = None) -> dict:
    """One caption's prefix and events: a phrase per motion (after its colour phrase when ``colours`` are given),
    its time span and the replacement phrases of the motion."""
    present = {visual_class(m) for m in motions}
    others = [m for m in MOTIONS if visual_class(m) not in present]
    main = scene.objects[0]
    # with colours the object is named without one: every event states its own, so no event reads differently
    subject = _plain_noun_phrase(rng, main) if colours else _noun_phrase(rng, main)
    events = []
    for k, motion in enumerate(motions):
        phrase = _pick(rng, MOTIONS[motion])
        text = phrase
        if colours:
            text = f"{_pick(rng, EVENTS['recolour']).format(colour=_pick(rng, COLOURS[colours[k]][1]))} and {phrase}"
        events.append({"text": text, "start": k * seconds, "end": (k + 1) * seconds, "action": phrase,
                       "alternatives": [p for m in others for p in MOTIONS[m]]})
    return {"prefix": f"{subject} {_bg_phrase(rng, scene)}", "events": events}


def _plain_noun_phrase(rng: np.random.Generator, obj) -> str:
    """The object's size and shape, without its colour ("a big ball")."""
    phrase = f"{_pick(rng, SIZES[obj.size][1])} {_pick(rng, SHAPES[obj.shape])}"
    return ("an " if phrase[0] in "aeiou" else "a ") + phrase
