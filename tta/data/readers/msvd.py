"""MSVD reader: the 670-video test split, first caption per video (HAT-VTR App. B.1).

Files in the format of the CLIP4Clip release of MSVD (Chen & Dolan, ACL 2011):

* ``train_list.txt`` / ``val_list.txt`` / ``test_list.txt``: one video id per line (1,200 / 100 / 670), e.g.
  ``-4wsuPCjDBc_5_15``;
* ``raw-captions.pkl``: a pickled ``dict`` video id -> list of captions, each caption a list of word tokens
  (``[["a", "man", "is", "cooking"], ...]``); X-Pool's ``captions_msvd.json`` (video id -> list of caption
  strings) is accepted instead;
* ``videos/<video id>.avi`` (the ``YouTubeClips`` folder of the official archive is found as well).

HAT-VTR forms the evaluation pairs from "the first official caption for each video" (App. B.1): 670 pairs, in the
order of ``test_list.txt``. ``all_captions=True`` gives every caption of every test video (CLIP4Clip's and X-Pool's
multi-caption evaluation, not the HAT-VTR protocol). Training always uses every caption.
The pickle is read with an unpickler that refuses any class or function, so a tampered file cannot run code.
"""

from __future__ import annotations

import io
import logging
import os
import pickle
from pathlib import Path
from typing import Any, Union

from tta.data.readers.common import (
    attach_video_paths,
    load_json_strict,
    pick_videos_dir,
    read_id_list,
    require_dir,
    require_file,
)
from tta.data.readers.msrvtt import VideoTextPair

__all__ = ["MSVD_SPLIT_FILES", "msvd_layout_help", "read_msvd_captions", "read_msvd_split"]

logger = logging.getLogger(__name__)
PathLike = Union[str, "os.PathLike[str]"]

MSVD_SPLIT_FILES = {"test": "test_list.txt", "val": "val_list.txt", "train": "train_list.txt"}
CAPTION_FILES = ("raw-captions.pkl", "captions_msvd.json")


def msvd_layout_help(root: PathLike) -> str:
    """Describes the expected MSVD layout and where it is published."""
    return (
        f"Expected MSVD layout under {os.fspath(root)!r}:\n"
        "  root/test_list.txt      (670 video ids, one per line; train_list.txt, val_list.txt for the other splits)\n"
        "  root/raw-captions.pkl   (dict video id -> list of tokenised captions; or X-Pool's captions_msvd.json)\n"
        "  root/videos/<video_id>.avi   (or root/YouTubeClips/, the folder of the official archive)\n"
        "MSVD is published by Microsoft Research (Chen & Dolan, ACL 2011): the YouTubeClips videos at "
        "https://www.cs.utexas.edu/users/ml/clamp/videoDescription/ and the split / caption files with "
        "CLIP4Clip (https://github.com/ArrowLuo/CLIP4Clip, msvd_data.zip). Set MSVD_ROOT or data.root (and "
        "data.videos_dir)."
    )


class _DataOnlyUnpickler(pickle.Unpickler):
    """Loads plain containers and strings only; any global (class, function) is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}: raw-captions.pkl holds only dicts, lists "
                                     "and strings")


def _as_text(caption: Any, where: str) -> str:
    if isinstance(caption, str):
        return caption
    if isinstance(caption, (list, tuple)) and all(isinstance(t, str) for t in caption):
        return " ".join(caption)
    raise ValueError(f"{where}: a caption must be a string or a list of word strings, found {type(caption).__name__}.")


def read_msvd_captions(path: PathLike) -> dict[str, list[str]]:
    """Reads ``raw-captions.pkl`` (token lists) or ``captions_msvd.json`` (strings): video id -> caption strings.

    Raises:
        FileNotFoundError: If the file is missing.
        ValueError: If the file is not a mapping from ids to lists of captions (or the pickle holds objects).
    """
    path = require_file(path, "MSVD", msvd_layout_help(Path(path).parent))
    if path.suffix == ".pkl":
        try:
            data = _DataOnlyUnpickler(io.BytesIO(path.read_bytes())).load()
        except (pickle.UnpicklingError, EOFError) as e:
            raise ValueError(f"{os.fspath(path)!r} is not a plain pickled caption dict: {e}") from e
    else:
        data = load_json_strict(path)
    if not isinstance(data, dict):
        raise ValueError(f"{os.fspath(path)!r} must map video ids to caption lists, found {type(data).__name__}.")
    out: dict[str, list[str]] = {}
    for vid, caps in data.items():
        if not isinstance(caps, (list, tuple)):
            raise ValueError(f"{os.fspath(path)!r}: the captions of {vid!r} are not a list.")
        out[str(vid)] = [_as_text(c, f"{os.fspath(path)!r} video {vid!r}") for c in caps]
    return out


def read_msvd_split(root: PathLike, split: str = "test", videos_dir: PathLike | None = None,
                    all_captions: bool = False, **_: object) -> list[VideoTextPair]:
    """Reads an MSVD split and resolves the video paths.

    Args:
        root: Directory with the split lists and the caption file (see :func:`msvd_layout_help`).
        split: ``"test"`` (670 videos), ``"val"`` or ``"train"``.
        videos_dir: Video directory; defaults to ``root/videos`` or ``root/YouTubeClips``.
        all_captions: For ``"test"`` / ``"val"``, every caption instead of the first (no effect on ``"train"``).

    Returns:
        Pairs in list order (captions in file order within a video); ``caption_id`` is ``<video id>#<index>``.

    Raises:
        FileNotFoundError: If the root, the list or the caption file is missing (the message lists the layout).
        ValueError: For an unknown split, a malformed file, or a listed video without captions.
    """
    help_text = msvd_layout_help(root)
    root = require_dir(root, "MSVD", help_text)
    if split not in MSVD_SPLIT_FILES:
        raise ValueError(f"Unknown MSVD split {split!r}; expected one of {sorted(MSVD_SPLIT_FILES)}.")
    ids = read_id_list(require_file(root / MSVD_SPLIT_FILES[split], "MSVD", help_text))
    cap_file = next((root / n for n in CAPTION_FILES if (root / n).is_file()), root / CAPTION_FILES[0])
    captions = read_msvd_captions(require_file(cap_file, "MSVD", help_text))
    without = [v for v in ids if not captions.get(v)]
    if without:
        raise ValueError(f"{len(without)} MSVD {split} video(s) have no caption in {cap_file.name}, e.g. "
                         f"{without[:5]}; the list and caption files do not belong together.")
    every = all_captions or split == "train"
    pairs = [VideoTextPair(v, c, f"{v}#{i}") for v in ids
             for i, c in enumerate(captions[v] if every else captions[v][:1])]
    logger.info("MSVD %s: %d pairs (%s) from %d videos", split, len(pairs),
                "all captions" if every else "first caption", len(ids))
    return attach_video_paths(pairs, pick_videos_dir(root, videos_dir, ("videos", "YouTubeClips")),
                              lambda v: [v], "MSVD")


read_msvd_split.layout_help = msvd_layout_help  # the expected layout, shown when data.root is missing
