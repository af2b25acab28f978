"""Decoded-frame cache: the sampled native-resolution frames of each video, decoded once.

One ``.npy`` file per (video file, frame rule, frame count), uint8 (T, H, W, 3), written atomically. The key
includes the file's absolute path, size and modification time, so a replaced video is decoded again. Videos of
any resolution share one cache (real datasets mix resolutions). Shifts are applied after the cache (on the
native frames, spec/mlvp.md §2.2), so one cache serves every shift of a dataset.

MLVP group-B shifts (H.264, flow blurs, temporal scrambling; spec/mlvp.md §2.2) need every frame of the video:
:meth:`FrameCache.decode_all` decodes them on each call and does **not** write them to disk. A full decode of a
real video is tens to hundreds of MB (an MSR-VTT clip of 10-30 s at 320×240 is 70-200 MB of uint8), against a
few hundred KB for the 12 sampled frames; a disk cache of full decodes would multiply the dataset by ~100 for a
gain only on repeated runs of the same group-B shift. To reuse group-B results, write a perturbed copy once with
``python -m tta.perturb`` and read it with ``shift.from_copy``.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from tta.data.frames import uniform_frame_indices
from tta.data.transforms import pad_frames
from tta.data.video import read_all_frames, read_frames, video_frame_count
from tta.utils.io import atomic_write_bytes
from tta.utils.progress import progress_iter

log = logging.getLogger(__name__)


class FrameCache:
    """Decode-once store of sampled frames.

    Args:
        root: cache directory (``None`` disables the disk cache: every call decodes).
        num_frames: frames per video (12 in the protocol).
    """

    def __init__(self, root: str | os.PathLike | None, num_frames: int = 12):
        self.root = Path(root) if root else None
        self.num_frames = num_frames
        self._indices: dict[str, list[int]] = {}
        if self.root:
            self.root.mkdir(parents=True, exist_ok=True)

    def indices(self, path: str) -> list[int]:
        """The uniform frame indices of ``path`` over the container's frame count (memoised in memory)."""
        path = os.fspath(path)
        if path not in self._indices:
            self._indices[path] = uniform_frame_indices(video_frame_count(path), self.num_frames)
        return self._indices[path]

    @staticmethod
    def decode_all(path: str) -> tuple[torch.Tensor, float]:
        """Every decoded frame of ``path``, uint8 (T, H, W, 3), and its frame rate; never cached (see above)."""
        return read_all_frames(os.fspath(path))

    def _key(self, path: str) -> str:
        st = os.stat(path)
        blob = f"{os.path.abspath(path)}|{st.st_size}|{st.st_mtime_ns}|uniform|{self.num_frames}"
        return hashlib.sha1(blob.encode()).hexdigest()

    def decode(self, path: str) -> torch.Tensor:
        """Decode the uniform frames of ``path`` (no cache): uint8 (num_frames, H, W, 3)."""
        frames = read_frames(path, self.indices(path))
        return pad_frames(frames, self.num_frames)

    def get(self, path: str) -> torch.Tensor:
        """Cached uint8 (num_frames, H, W, 3) frames of ``path``."""
        path = os.fspath(path)
        if self.root is None:
            return self.decode(path)
        file = self.root / f"{self._key(path)}.npy"
        if file.exists():
            try:
                return torch.from_numpy(np.load(file))
            except (ValueError, OSError, EOFError):
                log.warning("frame cache entry %s is unreadable; decoding %s again", file, path)
        frames = self.decode(path)
        buf = io.BytesIO()
        np.save(buf, frames.numpy())
        atomic_write_bytes(file, buf.getvalue())
        return frames

    def warm(self, paths: Sequence[str], description: str = "decoding videos") -> None:
        """Decode every missing entry (with a progress bar)."""
        if self.root is None:
            return
        missing = [p for p in paths if not (self.root / f"{self._key(p)}.npy").exists()]
        for p in progress_iter(missing, len(missing), description):
            self.get(p)
