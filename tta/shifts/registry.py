"""The shift registry: every video and text shift by name, with its severities and kind.

A video shift is ``fn(frames: uint8 (T, H, W, 3), severity: int, generator: torch.Generator, **options) -> uint8``;
its ``group`` says which frames it receives (spec/mlvp.md §2.2): ``"A"`` = the sampled native-resolution frames
of the clip (the frame cache's output), ``"B"`` = every decoded frame of the video file (the shift works on the
whole video; the pipeline applies the uniform frame rule to what it returns, so a shift that already returns the
clip's frames, e.g. temporal scrambling, passes through unchanged).
a text shift is ``fn(text: str, severity: int, rng: random.Random, **options) -> str``. Shift modules register
themselves with :func:`register_video_shift` / :func:`register_text_shift` when :mod:`tta.shifts` is imported.
"""

from __future__ import annotations

from collections.abc import Callable
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


_VIDEO: dict[str, ShiftInfo] = {}
_TEXT: dict[str, ShiftInfo] = {}


def register_video_shift(name: str, severities=(1, 2, 3, 4, 5), level: str = "low", changes_length: bool = False,
                         group: str = "A"):
    if group not in ("A", "B"):
        raise ValueError(f"group must be 'A' (sampled frames) or 'B' (whole video), got {group!r}")

    def wrap(fn):
        _VIDEO[name] = ShiftInfo(name, "video", fn, tuple(severities), level, changes_length, group)
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


def video_names() -> list[str]:
    return list(_VIDEO)


def text_names() -> list[str]:
    return list(_TEXT)
