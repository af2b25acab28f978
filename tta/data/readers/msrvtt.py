"""MSR-VTT annotation readers and writers in the formats of the X-Pool / CLIP4Clip code bases.

HAT-VTR App. B.1: MSR-VTT is evaluated on the 1k-A (JSFusion) test split, one caption per video (1:1, Q = G =
1000), streamed in file order. Files (all under one root):

* ``MSRVTT_JSFUSION_test.csv``: columns ``key,vid_key,video_id,sentence`` (e.g. ``ret0,msr9770,video9770,...``);
* ``MSRVTT_data.json``: ``{"videos": [{"video_id", "split", ...}], "sentences": [{"caption", "video_id",
  "sen_id"}]}`` (an optional ``"info"`` object comes first in the official file);
* ``MSRVTT_train.9k.csv`` / ``MSRVTT_train.7k.csv``: a ``video_id`` column;
* ``videos/<video_id>.mp4``.

Training uses every caption of every training video (as X-Pool and CLIP4Clip do), so ``all_captions`` has no
effect on ``split="train"``; on ``split="test"`` it switches from the 1:1 JSFusion captions to all captions of the
test videos from ``MSRVTT_data.json`` (a multi-caption setting that is not the HAT-VTR protocol).
The writers produce the official formats byte-for-byte as this module reads them (LF line ends, minimal CSV
quoting, single-line JSON), so ``read(write(x)) == x`` and ``write(read(f))`` reproduces ``f``.
"""

from __future__ import annotations

import csv
import json
import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

__all__ = [
    "VideoTextPair", "read_jsfusion_test_csv", "write_jsfusion_test_csv", "read_msrvtt_data_json",
    "write_msrvtt_data_json", "read_msrvtt_train_csv", "write_msrvtt_train_csv", "read_msrvtt_split",
    "resolve_video_path", "validate_pairs", "JSFUSION_COLUMNS", "VIDEO_EXTENSIONS", "msrvtt_layout_help",
]

logger = logging.getLogger(__name__)

PathLike = Union[str, "os.PathLike[str]"]
JSFUSION_COLUMNS = ("key", "vid_key", "video_id", "sentence")
VIDEO_EXTENSIONS = (".mp4", ".avi", ".webm", ".mkv", ".mov")


@dataclass
class VideoTextPair:
    """One (video, caption) pair of a retrieval split.

    Attributes:
        video_id: Video identifier, e.g. ``"video9770"``.
        caption: The caption, unmodified (may be empty; see :func:`validate_pairs`).
        caption_id: Caption identifier: the JSFusion ``key`` (``"ret0"``) or the ``sen_id`` of MSRVTT_data.json.
        video_path: Path of the video file, or ``None`` when not resolved.
        category: The video's category when the annotations have one (MSR-VTT's ``category`` id of
            MSRVTT_data.json, as a string; the scene background of the embedded benchmark), else ``None``.
    """

    video_id: str
    caption: str
    caption_id: str
    video_path: str | None = None
    category: str | None = None


def _layout_help(root: PathLike) -> str:
    """Describes the expected MSR-VTT directory layout."""
    return (
        f"Expected MSR-VTT layout under {os.fspath(root)!r}:\n"
        "  root/MSRVTT_JSFUSION_test.csv   (key,vid_key,video_id,sentence; the 1k-A test split)\n"
        "  root/MSRVTT_data.json           (videos and sentences, needed for train / all captions)\n"
        "  root/MSRVTT_train.9k.csv        (video_id column; or MSRVTT_train.7k.csv)\n"
        "  root/videos/<video_id>.mp4\n"
        "MSR-VTT is published by Microsoft (Xu et al., CVPR 2016); the JSFusion split files come from the "
        "CLIP4Clip / X-Pool repositories. Set the dataset root (and videos_dir) in the data config."
    )


msrvtt_layout_help = _layout_help  # public name, as the other formats' <format>_layout_help


def _require_file(path: Path, root: PathLike) -> None:
    """Raises FileNotFoundError with the layout help if ``path`` is not a file."""
    if not path.is_file():
        raise FileNotFoundError(f"MSR-VTT annotation file {os.fspath(path)!r} not found.\n{_layout_help(root)}")


def _read_csv(path: PathLike, required: Sequence[str]) -> list[dict[str, str]]:
    """Reads a CSV with a header, checking that the ``required`` columns exist.

    Files as spreadsheets and Windows tools save them read the same: a UTF-8 byte-order mark (``utf-8-sig``),
    CRLF line ends, spaces around header names, extra columns and blank (or all-empty) rows are tolerated.
    """
    path = Path(path)
    _require_file(path, path.parent)
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        reader.fieldnames = header = [h.strip() for h in reader.fieldnames or []]
        missing = [c for c in required if c not in header]
        if missing:
            raise ValueError(
                f"{os.fspath(path)!r} lacks column(s) {', '.join(map(repr, missing))}; "
                f"found {header}, expected {list(required)}."
            )
        return [row for row in reader if any((v or "").strip() for k, v in row.items() if k is not None)]


def _check_unique(video_ids: Sequence[str], path: PathLike) -> None:
    """Raises ValueError if a 1:1 split lists a video more than once."""
    seen: set[str] = set()
    dups: list[str] = []
    for v in video_ids:
        if v in seen and v not in dups:
            dups.append(v)
        seen.add(v)
    if dups:
        raise ValueError(
            f"{os.fspath(path)!r} is a 1:1 split but lists {len(dups)} video id(s) more than once, e.g. {dups[:5]}."
        )


def read_jsfusion_test_csv(path: PathLike, unique_videos: bool = True) -> list[VideoTextPair]:
    """Reads a JSFusion-format CSV (``key,vid_key,video_id,sentence``) in file order.

    Args:
        path: The CSV (e.g. ``MSRVTT_JSFUSION_test.csv``, the MSR-VTT 1k-A test split).
        unique_videos: Check that every video appears once (1:1 split).

    Returns:
        One pair per row with ``caption_id = key`` and ``video_path = None``.

    Raises:
        FileNotFoundError: If the file does not exist.
        ValueError: If a column is missing or (with ``unique_videos``) a video id repeats.
    """
    rows = _read_csv(path, JSFUSION_COLUMNS)
    pairs = [VideoTextPair(r["video_id"], r["sentence"], r["key"]) for r in rows]
    if unique_videos:
        _check_unique([p.video_id for p in pairs], path)
    return pairs


def _vid_key(video_id: str) -> str:
    """JSFusion ``vid_key`` of a video id: ``video9770`` -> ``msr9770``."""
    return "msr" + video_id[len("video"):] if video_id.startswith("video") else video_id


def write_jsfusion_test_csv(path: PathLike, pairs: Iterable[VideoTextPair]) -> None:
    """Writes pairs in the JSFusion CSV format (``vid_key`` derived as ``video<N>`` -> ``msr<N>``).

    Args:
        path: Output CSV.
        pairs: Pairs in stream order; ``caption_id`` becomes ``key``.
    """
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(JSFUSION_COLUMNS)
        for p in pairs:
            w.writerow([p.caption_id, _vid_key(p.video_id), p.video_id, p.caption])


def read_msrvtt_data_json(path: PathLike) -> dict[str, Any]:
    """Reads ``MSRVTT_data.json`` and checks its structure.

    Args:
        path: The JSON file.

    Returns:
        The parsed dict (``"videos"``, ``"sentences"`` and, if present, ``"info"``), unmodified.

    Raises:
        FileNotFoundError: If the file does not exist.
        ValueError: If a top-level list or a per-entry key (``video_id``, ``caption``) is missing.
    """
    path = Path(path)
    _require_file(path, path.parent)
    with open(path, encoding="utf-8-sig") as f:
        data = json.load(f)
    for key in ("videos", "sentences"):
        if not isinstance(data, dict) or not isinstance(data.get(key), list):
            raise ValueError(f"{os.fspath(path)!r} lacks the {key!r} list of the MSRVTT_data.json format.")
    for key, items, fields in (("videos", data["videos"], ("video_id",)),
                               ("sentences", data["sentences"], ("video_id", "caption"))):
        for i, item in enumerate(items):
            for field in fields:
                if field not in item:
                    raise ValueError(f"{os.fspath(path)!r}: {key}[{i}] lacks the {field!r} field.")
    return data


def write_msrvtt_data_json(path: PathLike, videos: Sequence[dict], sentences: Sequence[dict],
                           info: dict | None = None) -> None:
    """Writes ``MSRVTT_data.json`` (single-line JSON; ``info`` first when given, as in the official file).

    Args:
        path: Output file.
        videos: Video entries (``video_id``, ``split`` and any other fields, kept as given).
        sentences: Sentence entries (``caption``, ``video_id``, ``sen_id``).
        info: Optional ``"info"`` object.
    """
    data: dict[str, Any] = {} if info is None else {"info": info}
    data["videos"] = list(videos)
    data["sentences"] = list(sentences)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f)


def read_msrvtt_train_csv(path: PathLike) -> list[str]:
    """Reads the ``video_id`` column of ``MSRVTT_train.9k.csv`` / ``.7k.csv`` (file order, duplicates dropped).

    Raises:
        FileNotFoundError: If the file does not exist.
        ValueError: If the ``video_id`` column is missing.
    """
    rows = _read_csv(path, ("video_id",))
    return list(dict.fromkeys(r["video_id"] for r in rows))


def write_msrvtt_train_csv(path: PathLike, video_ids: Iterable[str]) -> None:
    """Writes a training video list (header ``video_id``, one id per line)."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["video_id"])
        w.writerows([v] for v in video_ids)


def resolve_video_path(videos_dir: PathLike, video_id: str) -> str:
    """Returns ``videos_dir/<video_id>`` with the first existing extension of :data:`VIDEO_EXTENSIONS`.

    Falls back to the ``.mp4`` path when none exists (:func:`validate_pairs` reports it).
    """
    for ext in VIDEO_EXTENSIONS:
        candidate = os.path.join(os.fspath(videos_dir), video_id + ext)
        if os.path.isfile(candidate):
            return candidate
    return os.path.join(os.fspath(videos_dir), video_id + VIDEO_EXTENSIONS[0])


def _captions_by_video(data: dict[str, Any]) -> dict[str, list[tuple[str, str]]]:
    """Maps video id -> [(sen_id, caption)] in sentence order."""
    out: dict[str, list[tuple[str, str]]] = {}
    for i, s in enumerate(data["sentences"]):
        out.setdefault(s["video_id"], []).append((str(s.get("sen_id", i)), s["caption"]))
    return out


def _all_caption_pairs(video_ids: Sequence[str], data: dict[str, Any], what: str) -> list[VideoTextPair]:
    """Every caption of each video, videos in the given order."""
    caps = _captions_by_video(data)
    without = [v for v in video_ids if v not in caps]
    if without:
        logger.warning("%d %s video(s) have no caption in MSRVTT_data.json, e.g. %s", len(without), what,
                       without[:5])
    return [VideoTextPair(v, c, cid) for v in video_ids for cid, c in caps.get(v, [])]


def _attach_categories(pairs: Sequence[VideoTextPair], data: dict[str, Any]) -> None:
    """Sets each pair's ``category`` from the ``category`` field of its video in MSRVTT_data.json, where present."""
    categories = {v["video_id"]: str(v["category"]) for v in data["videos"] if v.get("category") is not None}
    for p in pairs:
        p.category = categories.get(p.video_id)


def read_msrvtt_split(root: PathLike, split: str, videos_dir: PathLike | None = None,
                      train_csv: str = "MSRVTT_train.9k.csv", test_csv: str = "MSRVTT_JSFUSION_test.csv",
                      all_captions: bool = False) -> list[VideoTextPair]:
    """Reads an MSR-VTT split as X-Pool / CLIP4Clip do and resolves the video paths.

    Args:
        root: Directory with the annotation files (see the module docstring).
        split: ``"test"`` (JSFusion 1k-A, one caption per video), ``"train"`` (every caption of the videos of
            ``train_csv``, from MSRVTT_data.json) or ``"val"`` (``root/MSRVTT_val.csv`` in the JSFusion format).
        videos_dir: Video directory; defaults to ``root/videos``.
        train_csv: Training list relative to ``root`` (``MSRVTT_train.9k.csv`` or ``MSRVTT_train.7k.csv``).
        test_csv: Test CSV relative to ``root``.
        all_captions: For ``"test"``, use all captions of the test videos from MSRVTT_data.json instead of the
            JSFusion ones. No effect on ``"train"`` (always all captions) or ``"val"``.

    Returns:
        Pairs in file order with ``video_path`` set.

    Raises:
        FileNotFoundError: If the root or a needed file is missing (the message lists the expected layout).
        ValueError: For an unknown split, a missing column or duplicate videos in a 1:1 split.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"MSR-VTT root directory {os.fspath(root)!r} not found.\n{_layout_help(root)}")
    if split == "test":
        _require_file(root / test_csv, root)
        pairs = read_jsfusion_test_csv(root / test_csv)
        if all_captions:
            _require_file(root / "MSRVTT_data.json", root)
            pairs = _all_caption_pairs([p.video_id for p in pairs],
                                       read_msrvtt_data_json(root / "MSRVTT_data.json"), "test")
    elif split == "train":
        _require_file(root / "MSRVTT_data.json", root)
        _require_file(root / train_csv, root)
        pairs = _all_caption_pairs(read_msrvtt_train_csv(root / train_csv),
                                   read_msrvtt_data_json(root / "MSRVTT_data.json"), "train")
    elif split == "val":
        val = root / "MSRVTT_val.csv"
        if not val.is_file():
            raise FileNotFoundError(
                f"{os.fspath(val)!r} not found: MSR-VTT 1k-A has no official validation split (X-Pool and "
                "CLIP4Clip validate on the test split). To use one, write MSRVTT_val.csv in the JSFusion format "
                f"(key,vid_key,video_id,sentence).\n{_layout_help(root)}"
            )
        pairs = read_jsfusion_test_csv(val)
    else:
        raise ValueError(f"Unknown MSR-VTT split {split!r}; expected 'train', 'val' or 'test'.")
    if (root / "MSRVTT_data.json").is_file():
        _attach_categories(pairs, read_msrvtt_data_json(root / "MSRVTT_data.json"))
    vdir = Path(videos_dir) if videos_dir is not None else root / "videos"
    if not vdir.is_dir():
        logger.warning("MSR-VTT video directory %s does not exist; video paths will not resolve", vdir)
    cache: dict[str, str] = {}
    for p in pairs:
        if p.video_id not in cache:
            cache[p.video_id] = resolve_video_path(vdir, p.video_id)
        p.video_path = cache[p.video_id]
    return pairs


read_msrvtt_split.layout_help = msrvtt_layout_help  # the expected layout, shown when data.root is missing


def validate_pairs(pairs: Sequence[VideoTextPair], check_files: bool = True) -> list[tuple[int, str]]:
    """Lists problems of a split without raising: empty or whitespace-only captions and missing video files.

    Args:
        pairs: The pairs to check.
        check_files: Also check that each ``video_path`` exists (pairs whose path is ``None`` are not checked).

    Returns:
        ``(index, problem)`` tuples in pair order; empty if everything is fine.
    """
    problems: list[tuple[int, str]] = []
    for i, p in enumerate(pairs):
        if not p.caption or not p.caption.strip():
            problems.append((i, f"empty caption for {p.video_id} (caption_id {p.caption_id})"))
        if check_files and p.video_path is not None and not os.path.isfile(p.video_path):
            problems.append((i, f"missing video file {p.video_path}"))
    return problems
