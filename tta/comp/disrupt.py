"""The three evaluation disruptions of VideoComp (Sec. 3.1.2) on a video's ordered events.

A positive text is the events' own texts in chronological order, joined with forward-only connectives
("then", "after that", "finally"). Every disrupted text is joined the same way, so the connectives carry no
signal and only the disruption differs (the paper re-joins with a language model; this rule-based join is the
approximation, docs/methods/videocomp.md):

* ``temp_reorder``: the event texts in a permutation other than the identity;
* ``action_replace``: one event's key action phrase replaced by one of its alternatives, all else unchanged;
* ``seg_mismatch``: two distinct contiguous sub-intervals that differ in at least two events (Sec. 3.1.2), each
  with an event the other lacks; they need not overlap, so a two-event video gets the pair [c1] / [c2]. Each crop
  of the video (the interval's time span) is paired with its own text (positive) and the other's (negative).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

DISRUPTIONS = ("temp_reorder", "action_replace", "seg_mismatch")
EVENTS_FILE = "events.json"  # a multi-event dataset's events of every caption (written by tta/synth/multi_event.py)


@dataclass(frozen=True)
class Event:
    """One event of a video: its text, time span in seconds and (when known) its key action phrase."""

    text: str
    start: float
    end: float
    action: str = ""  # a phrase inside ``text``; "" = no replaceable action known
    alternatives: tuple[str, ...] = ()  # plausible replacements of ``action``


@dataclass(frozen=True)
class CompItem:
    """A video with two or more chronologically ordered events; ``prefix`` opens every text (synth: the object)."""

    video_id: str
    video_path: str
    duration: float
    events: tuple[Event, ...]
    prefix: str = ""


def connective(k: int, n: int) -> str:
    """The forward connective before event ``k`` of ``n`` ("" for the first)."""
    if k == 0:
        return ""
    if k == n - 1:
        return "finally"
    return "then" if k % 2 else "after that"


def join_events(texts: list[str], prefix: str = "") -> str:
    """One paragraph: ``prefix`` then the texts in the given order, each after its positional connective."""
    parts = []
    for k, text in enumerate(texts):
        text = text.strip().rstrip(".").strip()
        if k or prefix:  # the text continues a sentence
            text = f"{text[:1].lower()}{text[1:]}"
        if k:
            text = f"{connective(k, len(texts))} {text}"
        parts.append(text)
    return " ".join(f"{prefix} {', '.join(parts)}".split())


def positive_text(item: CompItem, first: int = 0, stop: int | None = None) -> str:
    """The chronological paragraph of events ``first .. stop - 1`` (all by default)."""
    return join_events([e.text for e in item.events[first:stop]], item.prefix)


def temp_reorder(item: CompItem, rng: np.random.Generator) -> str | None:
    """The events' texts in a random non-identity order whose paragraph differs from the positive; None when
    no order does (fewer than two distinct event texts)."""
    texts = [e.text for e in item.events]
    if len(set(texts)) < 2:
        return None
    positive = positive_text(item)
    while True:  # terminates: two distinct texts make some permutation differ
        order = rng.permutation(len(texts))
        text = join_events([texts[i] for i in order], item.prefix)
        if text != positive:
            return text


def action_replace(item: CompItem, rng: np.random.Generator) -> str | None:
    """The positive with one event's action phrase replaced by one of its alternatives; None when no event has
    a replaceable action."""
    events = replaced_events(item, rng)
    return None if events is None else join_events([e.text for e in events], item.prefix)


def reorder_replaced(item: CompItem, rng: np.random.Generator) -> str | None:
    """Two disruptions combined (training only, Sec. 3.1.2 "multi"): one action replaced, then the events
    reordered; None when either disruption does not apply."""
    events = replaced_events(item, rng)
    if events is None:
        return None
    return temp_reorder(CompItem(item.video_id, item.video_path, item.duration, events, item.prefix), rng)


def replaced_events(item: CompItem, rng: np.random.Generator) -> tuple[Event, ...] | None:
    """The events with one randomly chosen replaceable action replaced by a random alternative."""
    candidates = [k for k, e in enumerate(item.events) if e.action and e.alternatives and e.action in e.text]
    if not candidates:
        return None
    k = candidates[int(rng.integers(len(candidates)))]
    event = item.events[k]
    new = event.alternatives[int(rng.integers(len(event.alternatives)))]
    replaced = Event(replace_once(event.text, event.action, new), event.start, event.end)
    return item.events[:k] + (replaced,) + item.events[k + 1:]


def replace_once(text: str, old: str, new: str) -> str:
    """``text`` with the first whole-word occurrence of ``old`` replaced by ``new`` (``old`` must occur)."""
    match = re.search(rf"(?<!\w){re.escape(old)}(?!\w)", text)
    if match is None:
        raise ValueError(f"the action {old!r} is not a word of the event text {text!r}")
    return text[:match.start()] + new + text[match.end():]


def mismatch_intervals(n: int) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Every pair of contiguous intervals ``[first, stop)`` of ``n`` events that differ in at least two events, each
    holding an event the other lacks (Sec. 3.1.2, e.g. [c1, c2, c3] and [c3, c4]; for n = 2 only [c1] and [c2])."""
    spans = [(a, b) for a in range(n) for b in range(a + 1, n + 1)]
    pairs = []
    for i, (a1, b1) in enumerate(spans):
        for a2, b2 in spans[i + 1:]:
            one, two = set(range(a1, b1)), set(range(a2, b2))
            if len(one ^ two) >= 2 and one - two and two - one:
                pairs.append(((a1, b1), (a2, b2)))
    return pairs


@dataclass(frozen=True)
class Crop:
    """A contiguous interval of events and the time span of the video it covers."""

    first: int
    stop: int
    start: float
    end: float
    text: str


def seg_mismatch(item: CompItem, rng: np.random.Generator) -> tuple[Crop, Crop] | None:
    """Two crops for the segment-level mismatch (the positive pairs each crop with its own text, the negative
    with the other's); None for fewer than two events."""
    pairs = mismatch_intervals(len(item.events))
    if not pairs:
        return None
    crops = []
    for first, stop in pairs[int(rng.integers(len(pairs)))]:
        events = item.events[first:stop]
        crops.append(Crop(first, stop, min(e.start for e in events), max(e.end for e in events),
                          positive_text(item, first, stop)))
    return crops[0], crops[1]
