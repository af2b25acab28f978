"""Input screening: what a run does with test pairs it cannot use (``inputs.*``; the table of every kind of bad input
and its outcome is docs/outputs.md, "Bad input").

Before any encoding, :func:`screen_pairs` checks every (video, caption) pair once: unusable pairs are skipped with a
reason, odd but usable ones kept and counted in ``input_notes``. A skipped pair leaves the run whole, its query row
and its gallery item, so a caption whose video cannot be decoded is not a t2v query whose ground truth is missing
from the gallery; ``inputs.on_bad=error`` turns every skip into one error that lists them. A row whose scores turn
out non-finite after adaptation is a failure of the method, not a bad input: it is scored as a miss.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tta.data.cache import FrameCache
from tta.data.readers.msrvtt import VideoTextPair
from tta.media.video import pixel_format_traits
from tta.utils.progress import progress_iter

log = logging.getLogger(__name__)

DUPLICATE_POLICIES = ("error", "first", "multi")
SKIP_REASONS = ("duplicate_video_id", "empty_caption", "missing_video", "undecodable_video", "too_few_frames")
TINY_SIDE = 16
MAX_LISTED = 200  # items listed per note / in "skipped.items" (the counts are always complete)


class BadInputError(ValueError):
    """The test data cannot be used as given (the message says what is wrong and what to do)."""


@dataclass
class InputReport:
    """Skipped pairs and counted repairs of one run (``results.json`` ``skipped`` and ``input_notes``)."""

    skipped: list[dict[str, Any]] = field(default_factory=list)
    notes: dict[str, list[str]] = field(default_factory=dict)
    kept: list[int] = field(default_factory=list)  # row in the split as read of each pair the run keeps

    def skip(self, pair: VideoTextPair, index: int, reason: str, detail: str = "") -> None:
        self.skipped.append({"index": index, "video_id": pair.video_id, "caption_id": pair.caption_id,
                             "reason": reason, "detail": detail})

    def note(self, name: str, item: str) -> None:
        self.notes.setdefault(name, []).append(item)

    def skipped_record(self) -> dict[str, Any]:
        reasons = Counter(s["reason"] for s in self.skipped)
        return {"n": len(self.skipped), "reasons": dict(sorted(reasons.items())), "items": self.skipped[:MAX_LISTED]}

    def notes_record(self) -> dict[str, Any]:
        return {k: {"n": len(v), "items": v[:MAX_LISTED]} for k, v in sorted(self.notes.items())}

    def summary(self) -> str:
        lines = [f"  {s['reason']}: {s['video_id']} / {s['caption_id']}" + (f" ({s['detail']})" if s["detail"] else "")
                 for s in self.skipped[:10]]
        more = f"\n  ... and {len(self.skipped) - 10} more" if len(self.skipped) > 10 else ""
        return "\n".join(lines) + more


def _decode_problem(frames: FrameCache, path: str, min_frames: int) -> tuple[str, str] | None:
    """(reason, detail) when the video cannot be used, else None (the frames are now in the cache)."""
    if not os.path.isfile(path):
        return "missing_video", f"video file {path} does not exist"
    try:
        if not frames.has(path):  # an entry in the cache was decoded from this very file
            frames.get(path)
        distinct = len(set(frames.indices(path)))
    except FileNotFoundError as e:
        return "missing_video", str(e)
    except MemoryError:  # the machine's problem, not the video's: skipping it would change the evaluated set
        raise
    except Exception as e:  # noqa: BLE001 - any decoder failure makes this one video unusable, not the run
        return "undecodable_video", f"{type(e).__name__}: {e}"
    if distinct < min_frames:
        return "too_few_frames", f"{distinct} decodable frame(s) < inputs.min_frames={min_frames}"
    return None


def screen_pairs(pairs: Sequence[VideoTextPair], frames: FrameCache, tokenizer=None, *, on_bad: str = "skip",
                 duplicates: str = "error", min_frames: int = 1, decode: bool = True, missing_ok: bool = False,
                 description: str = "checking test videos") -> tuple[list[VideoTextPair], InputReport]:
    """Check every pair once (decoding its video into ``frames``); return the usable pairs and the report.

    Args:
        pairs: the test split in file order.
        frames: the run's frame cache (its ``max_side`` decides what is downscaled).
        tokenizer: the model's tokenizer (``num_tokens`` and ``context_length``) for the long-caption count.
        on_bad: ``skip`` (drop and count) or ``error`` (raise :class:`BadInputError` listing every problem).
        duplicates: ``error``, ``first`` or ``multi`` (keep them: a multi-caption split) for repeated video ids.
        min_frames: fewest distinct decodable frames a usable video has.
        decode: decode the videos (False only checks captions, ids and that files exist).
        missing_ok: missing video files are expected (``data.drop_missing: true``): they are skipped and counted
            as ``missing_video`` even under ``on_bad=error``, which then stops only for the other problems.

    Raises:
        BadInputError: for an unknown policy, duplicate ids under ``duplicates=error``, any problem under
            ``on_bad=error``, or when no pair is left.
    """
    if on_bad not in ("skip", "error"):
        raise BadInputError(f"inputs.on_bad must be 'skip' or 'error', got {on_bad!r}")
    if duplicates not in DUPLICATE_POLICIES:
        raise BadInputError(f"inputs.duplicates must be one of {', '.join(DUPLICATE_POLICIES)}, got {duplicates!r}")
    report = InputReport()
    first_row = _duplicate_rows(pairs, duplicates)
    noted: set[str] = set()
    videos = sorted({p.video_path for p in pairs if p.video_path is not None}) if decode else []
    probed = frames.load_probes(videos)  # a warm run's screen: no container opened again
    checked = list(progress_iter(list(enumerate(pairs)), len(pairs), description)) if decode else list(enumerate(pairs))
    for i, p in checked:
        problem = _pair_problem(p, i, first_row, frames, min_frames, decode)
        if problem is not None:
            report.skip(p, i, *problem)
            continue
        if decode and p.video_id not in noted:  # a multi-caption video is noted once
            noted.add(p.video_id)
            _notes(report, frames, p)
        if tokenizer is not None and hasattr(tokenizer, "num_tokens"):
            if tokenizer.num_tokens(p.caption) > tokenizer.context_length:
                report.note("long_caption", p.caption_id or p.video_id)
    if videos and not probed:
        frames.save_probes(videos)
    return _usable_pairs(pairs, report, on_bad, missing_ok), report


def _duplicate_rows(pairs: Sequence[VideoTextPair], duplicates: str) -> dict[int, int]:
    """Row of each pair to skip as a repeated video id -> the row of its first pair (none under ``multi``).

    Raises:
        BadInputError: under ``duplicates=error`` when an id repeats.
    """
    seen: dict[str, int] = {}
    dupes = [(i, p) for i, p in enumerate(pairs) if seen.setdefault(p.video_id, i) != i]
    if duplicates == "multi":
        dupes = []
    if dupes and duplicates == "error":
        ids = sorted({p.video_id for _, p in dupes})
        raise BadInputError(
            f"the test split repeats {len(ids)} video id(s) ({', '.join(ids[:5])}{', ...' if len(ids) > 5 else ''}; "
            f"{len(dupes)} extra pair(s)). The online runner scores one ground-truth item per query, so a repeated "
            "video would count its other copies as wrong answers. Use inputs.duplicates=multi for a multi-caption "
            "evaluation (every caption kept; spec/metrics.md §2), inputs.duplicates=first to keep the first pair "
            "of each video, or a one-caption-per-video split (data.all_captions=false).")
    return {i: seen[p.video_id] for i, p in dupes}


def _pair_problem(p: VideoTextPair, i: int, first_row: dict[int, int], frames: FrameCache, min_frames: int,
                  decode: bool) -> tuple[str, str] | None:
    """(reason, detail) when pair ``i`` cannot be used, else None (decoding its video into ``frames``)."""
    if i in first_row:
        return "duplicate_video_id", f"first pair of {p.video_id} is row {first_row[i]}"
    if not p.caption or not p.caption.strip():
        return "empty_caption", f"caption {p.caption!r}"
    if p.video_path is None:
        return "missing_video", "the reader resolved no video file for this id"
    problem = _decode_problem(frames, p.video_path, min_frames) if decode else None
    if problem is None and not decode and not os.path.isfile(p.video_path):
        problem = ("missing_video", f"video file {p.video_path} does not exist")
    return problem


def _usable_pairs(pairs: Sequence[VideoTextPair], report: InputReport, on_bad: str,
                  missing_ok: bool) -> list[VideoTextPair]:
    """The pairs not skipped (their rows into ``report.kept``); stops under ``on_bad=error`` or when none is left."""
    fatal = [s for s in report.skipped if not (missing_ok and s["reason"] == "missing_video")]
    if fatal and on_bad == "error":
        problems = InputReport(skipped=fatal)
        raise BadInputError(f"{len(fatal)} of {len(pairs)} test pair(s) cannot be used "
                            f"(inputs.on_bad=error):\n{problems.summary()}\nFix or remove them, or run with "
                            "inputs.on_bad=skip to drop them (counted in results.json 'skipped').")
    skipped_rows = {s["index"] for s in report.skipped}
    report.kept = [i for i in range(len(pairs)) if i not in skipped_rows]
    kept = [pairs[i] for i in report.kept]
    if report.skipped:
        log.warning("skipped %d of %d test pair(s) (%s); they are excluded from queries, gallery and metrics:\n%s",
                    len(report.skipped), len(pairs), report.skipped_record()["reasons"], report.summary())
    for name, items in report.notes.items():
        log.info("input note %s: %d item(s), e.g. %s", name, len(items), items[:3])
    if not kept:
        raise BadInputError(f"none of the {len(pairs)} test pair(s) can be used:\n{report.summary()}")
    return kept


def _notes(report: InputReport, frames: FrameCache, p: VideoTextPair) -> None:
    """Counted repairs of a usable video: padded (short), tiny, downscaled, grayscale (replicated), alpha (dropped)."""
    if len(set(frames.indices(p.video_path))) < frames.num_frames:
        report.note("short_video", p.video_id)
    size = frames.size(p.video_path)
    if size is not None and min(size) < TINY_SIDE:
        report.note("tiny_video", p.video_id)
    if frames.oversize(p.video_path):
        report.note("downscaled", p.video_id)
    header = frames.header(p.video_path)
    gray, alpha = pixel_format_traits(header[2] if header else None)
    if gray:
        report.note("grayscale_video", p.video_id)
    if alpha:
        report.note("alpha_dropped", p.video_id)
