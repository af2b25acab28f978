"""ActivityNet Captions reader: video-paragraph retrieval on ``val_1.json`` (HAT-VTR App. B.1).

HAT-VTR follows Gabeur et al. (2020) and CLIP4Clip (Luo et al., 2022): all sentences of a video are concatenated
into one paragraph and the ``val1`` split is the test set, 4,917 video-paragraph pairs (one per entry of
``val_1.json``, streamed in file order).

Official annotation format (Krishna et al., ICCV 2017; ``captions/val_1.json``, ``val_2.json``, ``train.json``)::

    {"v_QOlSCBRmfWY": {"duration": 82.73, "timestamps": [[0.83, 19.86], [17.37, 60.81]],
                       "sentences": ["A young woman is seen standing in a room.", " She then ..."]}, ...}

Keys are ``v_`` + the YouTube id. Sentences are stripped and joined with one space (CLIP's tokenizer collapses
whitespace, so this gives the same tokens as CLIP4Clip's plain ``" ".join``). Videos are found as
``videos/v_<id>.<ext>`` or ``videos/<id>.<ext>`` (CLIP4Clip's copies drop the ``v_``), also in sub-folders.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Union

from tta.data.readers.common import attach_video_paths, load_json_strict, pick_videos_dir, require_dir, require_file
from tta.data.readers.msrvtt import VideoTextPair

__all__ = ["ACTIVITYNET_SPLIT_FILES", "activitynet_layout_help", "read_activitynet_events", "read_activitynet_json",
           "read_activitynet_split"]

logger = logging.getLogger(__name__)
PathLike = Union[str, "os.PathLike[str]"]

# split -> annotation file; "test" is val1, the retrieval test set of HAT-VTR / CLIP4Clip (val2 is the other half)
ACTIVITYNET_SPLIT_FILES = {"test": "val_1.json", "val": "val_2.json", "train": "train.json"}


def activitynet_layout_help(root: PathLike) -> str:
    """Describes the expected ActivityNet Captions layout and where it is published."""
    return (
        f"Expected ActivityNet Captions layout under {os.fspath(root)!r}:\n"
        "  root/val_1.json    (the test split: {\"v_<id>\": {\"duration\", \"timestamps\", \"sentences\"}})\n"
        "  root/train.json    (training split, same format; val_2.json optional)\n"
        "  root/videos/v_<id>.mp4   (or <id>.mp4, any common container, sub-folders allowed)\n"
        "ActivityNet Captions is published by Krishna et al. (ICCV 2017) at "
        "https://cs.stanford.edu/people/ranjaykrishna/densevid/ (captions.zip); the videos come from ActivityNet "
        "(Caba Heilbron et al., CVPR 2015, http://activity-net.org/download.html). Set ACTIVITYNET_ROOT or "
        "data.root (and data.videos_dir)."
    )


def read_activitynet_json(path: PathLike) -> list[VideoTextPair]:
    """Reads an ActivityNet Captions annotation file into one paragraph per video, in file order.

    Args:
        path: ``val_1.json`` / ``val_2.json`` / ``train.json``.

    Returns:
        Pairs with ``video_id = caption_id =`` the ``v_<id>`` key and ``caption`` the joined sentences.

    Raises:
        FileNotFoundError: If the file is missing.
        ValueError: If the JSON is not an object of entries with a ``sentences`` list of strings.
    """
    path = require_file(path, "ActivityNet Captions", activitynet_layout_help(Path(path).parent))
    data = load_json_strict(path)
    if not isinstance(data, dict):
        raise ValueError(f"{os.fspath(path)!r} must be a JSON object keyed by video id (the val_1.json format), "
                         f"found {type(data).__name__}.")
    pairs = []
    for vid, entry in data.items():
        sentences = entry.get("sentences") if isinstance(entry, dict) else None
        if not isinstance(sentences, list) or not all(isinstance(s, str) for s in sentences):
            raise ValueError(f"{os.fspath(path)!r}: entry {vid!r} lacks a 'sentences' list of strings.")
        paragraph = " ".join(s.strip() for s in sentences if s.strip())
        pairs.append(VideoTextPair(vid, paragraph, vid))
    return pairs


def read_activitynet_events(path: PathLike) -> dict[str, tuple[float, list[tuple[float, float, str]]]]:
    """Per video, in file order: its duration and its events ``(start, end, sentence)`` as annotated.

    Raises:
        FileNotFoundError: If the file is missing.
        ValueError: If an entry lacks a duration, or its timestamps and sentences do not pair up as
            ``[start, end]`` numbers with one sentence each.
    """
    path = require_file(path, "ActivityNet Captions", activitynet_layout_help(Path(path).parent))
    data = load_json_strict(path)
    out = {}
    for vid, entry in (data.items() if isinstance(data, dict) else ()):
        sentences, stamps = entry.get("sentences"), entry.get("timestamps")
        ok = (isinstance(sentences, list) and isinstance(stamps, list) and len(stamps) == len(sentences)
              and isinstance(entry.get("duration"), (int, float))
              and all(isinstance(t, list) and len(t) == 2 and all(isinstance(x, (int, float)) for x in t)
                      for t in stamps))
        if not ok:
            raise ValueError(f"{os.fspath(path)!r}: entry {vid!r} needs a numeric 'duration' and one [start, end] "
                             f"'timestamps' pair per sentence (the val_1.json format).")
        out[vid] = (float(entry["duration"]), [(float(a), float(b), str(s).strip())
                                               for (a, b), s in zip(stamps, sentences, strict=True)])
    return out


def _candidates(video_id: str) -> list[str]:
    bare = video_id[2:] if video_id.startswith("v_") else video_id
    return [video_id, bare] if bare != video_id else [video_id, "v_" + video_id]


def read_activitynet_split(root: PathLike, split: str = "test", videos_dir: PathLike | None = None,
                           **_: object) -> list[VideoTextPair]:
    """Reads an ActivityNet Captions split (paragraph per video) and resolves the video paths.

    Args:
        root: Directory with the annotation files (see :func:`activitynet_layout_help`).
        split: ``"test"`` (val_1.json, 4,917 pairs on the official file), ``"val"`` (val_2.json) or ``"train"``.
        videos_dir: Video directory; defaults to ``root/videos``.

    Returns:
        Pairs in file order with ``video_path`` set.

    Raises:
        FileNotFoundError: If the root or the split's file is missing (the message lists the expected layout).
        ValueError: For an unknown split or a malformed file.
    """
    help_text = activitynet_layout_help(root)
    root = require_dir(root, "ActivityNet Captions", help_text)
    if split not in ACTIVITYNET_SPLIT_FILES:
        raise ValueError(f"Unknown ActivityNet split {split!r}; expected one of {sorted(ACTIVITYNET_SPLIT_FILES)}.")
    path = require_file(root / ACTIVITYNET_SPLIT_FILES[split], "ActivityNet Captions", help_text)
    pairs = read_activitynet_json(path)
    logger.info("ActivityNet %s: %d video-paragraph pairs from %s", split, len(pairs), path.name)
    return attach_video_paths(pairs, pick_videos_dir(root, videos_dir), _candidates, "ActivityNet")


read_activitynet_split.layout_help = activitynet_layout_help  # the expected layout, shown when data.root is missing
