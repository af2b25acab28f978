"""LSMDC reader: the public test set of the LSMDC 2016 challenge (HAT-VTR App. B.1).

Official annotation format (Rohrbach et al., IJCV 2017; ``LSMDC16_challenge_1000_publictect.csv``,
``LSMDC16_annos_training.csv``, ``LSMDC16_annos_val.csv``): no header, one clip per line, six tab-separated
fields ``<CLIP_ID> <START_ALIGNED> <END_ALIGNED> <START_EXTRACTED> <END_EXTRACTED> <SENTENCE>``. The public test
file has 1,000 rows and no repeated clip. A clip id is ``<movie>_<hh.mm.ss.fff>-<hh.mm.ss.fff>``, e.g.
``0001_American_Beauty_00.00.51.926-00.00.54.129``, and the clip is stored as ``<movie>/<clip id>.avi``.

HAT-VTR App. B.1 reports 999 clips: its X-Pool code base skips ``1012_Unbreakable_00.05.16.065-00.05.21.941``
(:data:`XPOOL_EXCLUDED_CLIPS`), while CLIP4Clip keeps all 1,000 rows whose video exists. Both are one argument
away: ``exclude_clips`` (default none, i.e. 1,000 pairs).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Union

from tta.data.readers.common import attach_video_paths, pick_videos_dir, require_dir, require_file
from tta.data.readers.msrvtt import VideoTextPair

__all__ = ["LSMDC_SPLIT_FILES", "XPOOL_EXCLUDED_CLIPS", "lsmdc_layout_help", "lsmdc_movie", "read_lsmdc_csv",
           "read_lsmdc_split"]

logger = logging.getLogger(__name__)
PathLike = Union[str, "os.PathLike[str]"]

LSMDC_SPLIT_FILES = {"test": "LSMDC16_challenge_1000_publictect.csv", "val": "LSMDC16_annos_val.csv",
                     "train": "LSMDC16_annos_training.csv"}
XPOOL_EXCLUDED_CLIPS = ("1012_Unbreakable_00.05.16.065-00.05.21.941",)
_CLIP_TIMES = re.compile(r"_\d{2}\.\d{2}\.\d{2}\.\d{3}-\d{2}\.\d{2}\.\d{2}\.\d{3}$")


def lsmdc_layout_help(root: PathLike) -> str:
    """Describes the expected LSMDC layout and where it is published."""
    return (
        f"Expected LSMDC layout under {os.fspath(root)!r}:\n"
        "  root/LSMDC16_challenge_1000_publictect.csv   (test: 1,000 rows, 6 tab-separated fields, no header)\n"
        "  root/LSMDC16_annos_training.csv               (training split, same format; LSMDC16_annos_val.csv)\n"
        "  root/videos/<movie>/<clip_id>.avi             (e.g. 0001_American_Beauty/0001_American_Beauty_"
        "00.00.51.926-00.00.54.129.avi)\n"
        "LSMDC is published by the MPI for Informatics (Rohrbach et al., IJCV 2017) after signing its licence at "
        "https://sites.google.com/site/describingmovies/download. Set LSMDC_ROOT or data.root (and "
        "data.videos_dir)."
    )


def lsmdc_movie(clip_id: str) -> str:
    """The movie folder of a clip id (the id without its ``_<start>-<end>`` time suffix)."""
    m = _CLIP_TIMES.search(clip_id)
    if m:
        return clip_id[: m.start()]
    return clip_id.rsplit("_", 1)[0]


def read_lsmdc_csv(path: PathLike, unique_clips: bool = True) -> list[VideoTextPair]:
    """Reads an LSMDC annotation file (six tab-separated fields per line), in file order.

    Args:
        path: The file.
        unique_clips: Check that no clip appears twice (true for the public test file).

    Returns:
        One pair per line; ``caption_id`` is the 0-based line number.

    Raises:
        FileNotFoundError: If the file is missing.
        ValueError: If a line does not have six fields or (with ``unique_clips``) a clip repeats.
    """
    path = require_file(path, "LSMDC", lsmdc_layout_help(Path(path).parent))
    pairs: list[VideoTextPair] = []
    with open(path, encoding="utf-8-sig") as f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) != 6:
                raise ValueError(
                    f"{os.fspath(path)!r} line {lineno}: expected 6 tab-separated fields (clip id, start/end "
                    f"aligned, start/end extracted, sentence), found {len(fields)}."
                )
            pairs.append(VideoTextPair(fields[0].strip(), fields[5], str(len(pairs))))
    if unique_clips:
        seen: set[str] = set()
        dups = [p.video_id for p in pairs if p.video_id in seen or seen.add(p.video_id)]
        if dups:
            raise ValueError(f"{os.fspath(path)!r} lists {len(dups)} clip(s) more than once, e.g. {dups[:5]}.")
    return pairs


def _candidates(clip_id: str) -> list[str]:
    return [os.path.join(lsmdc_movie(clip_id), clip_id), clip_id]


def read_lsmdc_split(root: PathLike, split: str = "test", videos_dir: PathLike | None = None,
                     exclude_clips: Iterable[str] = (), **_: object) -> list[VideoTextPair]:
    """Reads an LSMDC split and resolves the video paths (``<videos_dir>/<movie>/<clip_id>.avi``).

    Args:
        root: Directory with the annotation files (see :func:`lsmdc_layout_help`).
        split: ``"test"`` (the 1,000-clip public test), ``"val"`` or ``"train"``.
        videos_dir: Video directory; defaults to ``root/videos``.
        exclude_clips: Clip ids to drop; :data:`XPOOL_EXCLUDED_CLIPS` gives X-Pool's 999-clip test set.

    Returns:
        Pairs in file order with ``video_path`` set.

    Raises:
        FileNotFoundError: If the root or the split's file is missing (the message lists the expected layout).
        ValueError: For an unknown split or a malformed file.
    """
    help_text = lsmdc_layout_help(root)
    root = require_dir(root, "LSMDC", help_text)
    if split not in LSMDC_SPLIT_FILES:
        raise ValueError(f"Unknown LSMDC split {split!r}; expected one of {sorted(LSMDC_SPLIT_FILES)}.")
    path = require_file(root / LSMDC_SPLIT_FILES[split], "LSMDC", help_text)
    pairs = read_lsmdc_csv(path, unique_clips=split == "test")
    excluded = set(exclude_clips or ())
    if excluded:
        unknown = excluded - {p.video_id for p in pairs}
        if unknown:
            logger.warning("LSMDC exclude_clips names %d clip(s) not in %s: %s", len(unknown), path.name,
                           sorted(unknown)[:5])
        pairs = [p for p in pairs if p.video_id not in excluded]
    logger.info("LSMDC %s: %d clip-sentence pairs from %s", split, len(pairs), path.name)
    return attach_video_paths(pairs, pick_videos_dir(root, videos_dir), _candidates, "LSMDC")


read_lsmdc_split.layout_help = lsmdc_layout_help  # the expected layout, shown when data.root is missing
