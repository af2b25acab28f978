"""DiDeMo reader: paragraph-to-video retrieval on the test split (HAT-VTR App. B.1; no loader in the authors' code).

Official annotation format (Hendricks et al., ICCV 2017, ``LocalizingMoments/data/test_data.json``): a JSON list
of moment annotations in temporal order per video, e.g.::

    [{"annotation_id": 5121, "description": "the girl jumps into the pool", "video": "<flickr id>.mov",
      "times": [[1, 1], [1, 2], [1, 1], [1, 1]], "download_link": "...", "num_segments": 6}, ...]

HAT-VTR (App. B.1) concatenates each video's sentences and evaluates on the official test split, 1,004
video-paragraph pairs from 4,021 sentences. The video list ``test_list.txt`` (Collaborative Experts' split, used by
CLIP4Clip) restricts the videos when present. Pairs follow the order of first appearance in ``test_data.json``;
sentences are joined with one space in file order. A video is found by its exact name or by its stem with any
common container (downloads are often re-encoded to ``.mp4``).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Union

from tta.data.readers.common import (
    attach_video_paths,
    load_json_strict,
    pick_videos_dir,
    read_id_list,
    require_dir,
    require_file,
)
from tta.data.readers.msrvtt import VideoTextPair

__all__ = ["DIDEMO_SPLIT_FILES", "didemo_layout_help", "read_didemo_json", "read_didemo_split"]

logger = logging.getLogger(__name__)
PathLike = Union[str, "os.PathLike[str]"]

DIDEMO_SPLIT_FILES = {"test": ("test_data.json", "test_list.txt"), "val": ("val_data.json", "val_list.txt"),
                      "train": ("train_data.json", "train_list.txt")}


def didemo_layout_help(root: PathLike) -> str:
    """Describes the expected DiDeMo layout and where it is published."""
    return (
        f"Expected DiDeMo layout under {os.fspath(root)!r}:\n"
        "  root/test_data.json   (list of {\"description\", \"video\", \"times\", ...}; train_data.json, "
        "val_data.json)\n"
        "  root/test_list.txt    (optional: the video names of the split, one per line)\n"
        "  root/videos/<video>   (the name in the \"video\" field, or its stem with .mp4 / another container)\n"
        "DiDeMo is published by Hendricks et al. (ICCV 2017) at https://github.com/LisaAnne/LocalizingMoments "
        "(annotations in data/, videos via its download script); the split lists come from Collaborative Experts "
        "(https://github.com/albanie/collaborative-experts). Set DIDEMO_ROOT or data.root (and data.videos_dir)."
    )


def read_didemo_json(path: PathLike, videos: list[str] | None = None) -> list[VideoTextPair]:
    """Reads a DiDeMo annotation file into one paragraph per video.

    Args:
        path: ``test_data.json`` (or the train / val file).
        videos: If given, keep only these videos (a split list); listed videos without annotations are logged.

    Returns:
        Pairs in order of first appearance; ``video_id = caption_id =`` the ``video`` field.

    Raises:
        FileNotFoundError: If the file is missing.
        ValueError: If the JSON is not a list of objects with ``video`` and ``description`` strings.
    """
    path = require_file(path, "DiDeMo", didemo_layout_help(Path(path).parent))
    data = load_json_strict(path)
    if not isinstance(data, list):
        raise ValueError(f"{os.fspath(path)!r} must be a JSON list of moment annotations (the test_data.json "
                         f"format), found {type(data).__name__}.")
    keep = None if videos is None else set(videos)
    sentences: dict[str, list[str]] = {}
    for i, item in enumerate(data):
        if not isinstance(item, dict) or not isinstance(item.get("video"), str) \
                or not isinstance(item.get("description"), str):
            raise ValueError(f"{os.fspath(path)!r}: entry {i} lacks a 'video' or 'description' string.")
        if keep is not None and item["video"] not in keep:
            continue
        sentences.setdefault(item["video"], []).append(item["description"].strip())
    if keep is not None and len(sentences) < len(keep):
        missing = [v for v in videos if v not in sentences]
        logger.warning("%d listed DiDeMo video(s) have no annotation in %s, e.g. %s", len(missing), path.name,
                       missing[:5])
    return [VideoTextPair(v, " ".join(s for s in sents if s), v) for v, sents in sentences.items()]


def _candidates(video: str) -> list[str]:
    stem, ext = os.path.splitext(video)
    return [video, stem] if ext else [video]


def read_didemo_split(root: PathLike, split: str = "test", videos_dir: PathLike | None = None,
                      use_split_list: bool = True, **_: object) -> list[VideoTextPair]:
    """Reads a DiDeMo split (one paragraph per video) and resolves the video paths.

    Args:
        root: Directory with the annotation files (see :func:`didemo_layout_help`).
        split: ``"test"`` (1,004 pairs in HAT-VTR), ``"val"`` or ``"train"``.
        videos_dir: Video directory; defaults to ``root/videos``.
        use_split_list: Restrict to ``<split>_list.txt`` when that file exists.

    Returns:
        Pairs with ``video_path`` set.

    Raises:
        FileNotFoundError: If the root or the annotation file is missing (the message lists the expected layout).
        ValueError: For an unknown split or a malformed file.
    """
    help_text = didemo_layout_help(root)
    root = require_dir(root, "DiDeMo", help_text)
    if split not in DIDEMO_SPLIT_FILES:
        raise ValueError(f"Unknown DiDeMo split {split!r}; expected one of {sorted(DIDEMO_SPLIT_FILES)}.")
    ann, lst = DIDEMO_SPLIT_FILES[split]
    videos = read_id_list(root / lst) if use_split_list and (root / lst).is_file() else None
    pairs = read_didemo_json(require_file(root / ann, "DiDeMo", help_text), videos)
    logger.info("DiDeMo %s: %d video-paragraph pairs from %s%s", split, len(pairs), ann,
                f" restricted to {lst}" if videos is not None else "")
    return attach_video_paths(pairs, pick_videos_dir(root, videos_dir), _candidates, "DiDeMo")


read_didemo_split.layout_help = didemo_layout_help  # the expected layout, shown when data.root is missing
