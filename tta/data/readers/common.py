"""Helpers shared by the dataset readers (HAT-VTR App. B.1): required files, video lookup, JSON loading.

Each reader names its dataset's expected layout and where it is published in every "not found" error
(:func:`require_dir`, :func:`require_file`). Videos are looked up by :class:`VideoLocator`: first at the paths
the official loaders use (e.g. ``<movie>/<clip>.avi`` for LSMDC), then anywhere below the video directory by
file name (as CLIP4Clip's loaders do with ``os.walk``), so re-encoded copies with another extension are found too.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Union

from tta.data.readers.msrvtt import VIDEO_EXTENSIONS, VideoTextPair

__all__ = ["ALL_VIDEO_EXTENSIONS", "VideoLocator", "attach_video_paths", "load_json_strict", "read_id_list",
           "require_dir", "require_file", "pick_videos_dir"]

logger = logging.getLogger(__name__)

PathLike = Union[str, "os.PathLike[str]"]
# MSR-VTT's list first (the default fallback), then the containers found in the DiDeMo / ActivityNet downloads
ALL_VIDEO_EXTENSIONS = tuple(VIDEO_EXTENSIONS) + (".mov", ".m4v", ".3gp", ".mpg", ".mpeg", ".wmv", ".flv")


def require_dir(root: PathLike, dataset: str, layout_help: str) -> Path:
    """Returns ``root`` as a Path; raises FileNotFoundError with the layout help if it is not a directory."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{dataset} root directory {os.fspath(root)!r} not found.\n{layout_help}")
    return root


def require_file(path: PathLike, dataset: str, layout_help: str) -> Path:
    """Returns ``path`` as a Path; raises FileNotFoundError with the layout help if it is not a file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{dataset} annotation file {os.fspath(path)!r} not found.\n{layout_help}")
    return path


def _no_duplicate_keys(path: Path) -> Callable[[list[tuple[str, Any]]], dict]:
    def hook(items: list[tuple[str, Any]]) -> dict:
        out: dict = {}
        for k, v in items:
            if k in out:
                raise ValueError(f"{os.fspath(path)!r} has the key {k!r} twice in one JSON object; the file is "
                                 "damaged or not the official one.")
            out[k] = v
        return out
    return hook


def load_json_strict(path: PathLike) -> Any:
    """Loads JSON, rejecting duplicate keys (``json.load`` would silently keep the last one)."""
    path = Path(path)
    with open(path, encoding="utf-8-sig") as f:
        try:
            return json.load(f, object_pairs_hook=_no_duplicate_keys(path))
        except json.JSONDecodeError as e:
            raise ValueError(f"{os.fspath(path)!r} is not valid JSON: {e}") from e


def read_id_list(path: PathLike) -> list[str]:
    """Reads a one-id-per-line list (``test_list.txt``), skipping blank lines; duplicates raise ValueError."""
    with open(path, encoding="utf-8-sig") as f:
        ids = [line.strip() for line in f if line.strip()]
    seen: set[str] = set()
    dups = [v for v in ids if v in seen or seen.add(v)]
    if dups:
        raise ValueError(f"{os.fspath(path)!r} lists {len(dups)} id(s) more than once, e.g. {dups[:5]}.")
    return ids


def pick_videos_dir(root: Path, videos_dir: PathLike | None, conventional: Sequence[str] = ("videos",)) -> Path:
    """The video directory: ``videos_dir`` if given, else the first existing ``root/<name>`` of ``conventional``."""
    if videos_dir is not None:
        return Path(videos_dir)
    for name in conventional:
        if (root / name).is_dir():
            return root / name
    return root / conventional[0]


class VideoLocator:
    """Finds video files by candidate names below one directory.

    A candidate is a path relative to the directory, with or without extension. Lookup order: the candidate as
    given, then with each of :data:`ALL_VIDEO_EXTENSIONS` appended, then (once, lazily) a recursive index of every
    file below the directory by file name and by stem, for layouts with sub-folders.

    Args:
        videos_dir: Directory holding the videos (it may not exist; every lookup then fails).
        recursive: Allow the recursive index.
    """

    def __init__(self, videos_dir: PathLike, recursive: bool = True):
        self.dir = Path(videos_dir)
        self.recursive = recursive
        self._index: dict[str, str] | None = None

    def _build_index(self) -> dict[str, str]:
        index: dict[str, str] = {}
        if self.dir.is_dir():
            seen: set[str] = set()  # symlinked sub-folders are followed (datasets assembled from links), cycles not
            for dirpath, dirs, files in os.walk(self.dir, followlinks=True):
                real = os.path.realpath(dirpath)
                if real in seen:
                    dirs[:] = []
                    continue
                seen.add(real)
                for name in sorted(files):
                    full = os.path.join(dirpath, name)
                    index.setdefault(name, full)
                    stem, ext = os.path.splitext(name)
                    if ext.lower() in ALL_VIDEO_EXTENSIONS:
                        index.setdefault(stem, full)
        return index

    def find(self, candidates: Sequence[str]) -> str | None:
        """The first existing file among the candidates, or ``None``."""
        for cand in candidates:
            base = os.path.join(os.fspath(self.dir), cand)
            if os.path.isfile(base):
                return base
            for ext in ALL_VIDEO_EXTENSIONS:
                if os.path.isfile(base + ext):
                    return base + ext
        if not self.recursive or not self.dir.is_dir():
            return None
        if self._index is None:
            self._index = self._build_index()
        for cand in candidates:
            name = os.path.basename(cand)
            if name in self._index:
                return self._index[name]
        return None


def attach_video_paths(pairs: list[VideoTextPair], videos_dir: Path, candidates: Callable[[str], list[str]],
                       dataset: str) -> list[VideoTextPair]:
    """Sets ``video_path`` of every pair (unresolved videos get the first candidate + ``.mp4`` and a warning).

    Args:
        pairs: Pairs to update in place (and return).
        videos_dir: Video directory.
        candidates: ``video_id -> relative names`` to try, most specific first.
        dataset: Name used in the warning.
    """
    if not videos_dir.is_dir():
        logger.warning("%s video directory %s does not exist; video paths will not resolve", dataset, videos_dir)
    locator = VideoLocator(videos_dir)
    cache: dict[str, str] = {}
    missing = 0
    for p in pairs:
        if p.video_id not in cache:
            cands = candidates(p.video_id)
            found = locator.find(cands)
            if found is None:
                missing += 1
                first = cands[0]
                found = os.path.join(os.fspath(videos_dir), first if os.path.splitext(first)[1] else first + ".mp4")
            cache[p.video_id] = found
        p.video_path = cache[p.video_id]
    if missing:
        logger.warning("%s: %d of %d video(s) not found under %s (see validate_pairs / data.drop_missing)",
                       dataset, missing, len(cache), videos_dir)
    return pairs
