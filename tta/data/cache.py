"""Decoded-frame cache: the sampled native-resolution frames of each video, decoded once.

One ``.npy`` file per (video file, frame rule, frame count), uint8 (T, H, W, 3), written atomically; the key holds
the file's absolute path, size and modification time, so a replaced video is decoded again. Shifts act after the
cache (on the native frames), so one cache serves every shift of a dataset. Frames larger than ``inputs.max_side``
are downscaled right after decoding, before any shift.

Group-B shifts (H.264, flow blurs, temporal scrambling) need every frame: :meth:`FrameCache.decode_all` decodes
them on each call and never writes them, since full decodes are about a hundred times the sampled frames on disk
(docs/shifts/mlvp.md); a perturbed copy (``python -m tta.perturb``, ``shift.from_copy``) reuses group-B results.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from tta.media.frames import uniform_frame_indices
from tta.media.transforms import pad_frames
from tta.media.video import read_all_frames, read_frames, video_frame_count, video_header
from tta.utils.forking import fork_safe, loader_worker_init
from tta.utils.io import load_cached, save_cached
from tta.utils.progress import progress_iter

log = logging.getLogger(__name__)


class FrameCache:
    """Decode-once store of sampled frames.

    Args:
        root: cache directory (``None`` disables the disk cache: every call decodes).
        num_frames: frames per video (12 in the protocol).
        max_side: downscale decoded frames whose longer side exceeds this many pixels (``None``: never).
    """

    def __init__(self, root: str | os.PathLike | None, num_frames: int = 12, max_side: int | None = None):
        self.root = Path(root) if root else None
        self.num_frames = num_frames
        self.max_side = int(max_side) if max_side else None
        self._sizes: dict[str, tuple[int, int, str | None] | None] = {}  # headers
        self._counts: dict[str, int] = {}  # container frame counts
        self._indices: dict[str, list[int]] = {}
        if self.root:
            self.root.mkdir(parents=True, exist_ok=True)

    def indices(self, path: str) -> list[int]:
        """The uniform frame indices of ``path`` over the container's frame count (memoised in memory)."""
        path = os.fspath(path)
        if path not in self._indices:
            self._indices[path] = uniform_frame_indices(self.frame_count(path), self.num_frames)
        return self._indices[path]

    def frame_count(self, path: str) -> int:
        """The container frame count of ``path`` (memoised; :meth:`load_probes` fills the memo from the disk)."""
        path = os.fspath(path)
        if path not in self._counts:
            self._counts[path] = video_frame_count(path)
        return self._counts[path]

    def header(self, path: str) -> tuple[int, int, str | None] | None:
        """(height, width, pixel format) of ``path`` from its header (memoised); None if unknown."""
        path = os.fspath(path)
        if path not in self._sizes:
            self._sizes[path] = video_header(path)
        return self._sizes[path]

    def has(self, path: str) -> bool:
        """Whether ``path``'s frames are in the disk cache (an entry is written only after a successful decode, and
        its key changes with the file; a damaged one is found and rebuilt by :meth:`get`)."""
        return self.root is not None and (self.root / f"{self.key(os.fspath(path))}.npy").exists()

    def _probe_file(self, paths: Sequence[str]) -> Path | None:
        """Where the probes of exactly these files (as they are now: path, size, modification time) are kept."""
        if self.root is None:
            return None
        blob = "\n".join(_identity(os.fspath(p), missing_ok=True) for p in paths)
        return self.root / f"probes-{hashlib.sha1(blob.encode()).hexdigest()[:20]}.json"

    def load_probes(self, paths: Sequence[str]) -> bool:
        """Fill the frame-count and header memos of ``paths`` from the disk (an earlier :meth:`save_probes` of the same
        files); True when every file's probe was there. Opening each container again costs more than its decode from
        the cache (about 4 ms a video), so a warm run screens from this record."""
        file = self._probe_file(paths)
        record = load_cached(file, _read_json) if file is not None else None
        if not isinstance(record, dict):  # absent or damaged (then removed): probed again and rewritten
            return False
        for p in paths:
            count, header = record.get(os.fspath(p), (None, None))
            if count is not None:
                self._counts[os.fspath(p)] = int(count)
                self._sizes[os.fspath(p)] = tuple(header) if header else None
        return all(os.fspath(p) in self._counts for p in paths)

    def save_probes(self, paths: Sequence[str]) -> None:
        """Keep the probes of ``paths`` (those probed: a video that could not be opened is probed again next time)."""
        file = self._probe_file(paths)
        if file is None or file.exists():
            return
        record = {os.fspath(p): [self._counts[os.fspath(p)], self.header(os.fspath(p))]
                  for p in paths if os.fspath(p) in self._counts}
        save_cached(file, data=json.dumps(record).encode())

    def size(self, path: str) -> tuple[int, int] | None:
        """(height, width) of ``path`` from its header (memoised); None if unknown."""
        header = self.header(path)
        return None if header is None else header[:2]

    def oversize(self, path: str) -> bool:
        """Whether ``path``'s frames exceed ``max_side`` (header size) and are therefore downscaled."""
        if not self.max_side:
            return False
        size = self.size(path)
        return size is not None and max(size) > self.max_side

    def decode_all(self, path: str) -> tuple[torch.Tensor, float]:
        """Every decoded frame of ``path``, uint8 (T, H, W, 3), and its frame rate; never cached (see above)."""
        frames, fps = read_all_frames(os.fspath(path))
        return limit_side(frames, self.max_side), fps

    def key(self, path: str) -> str:
        """The name of ``path``'s entry: its absolute path, size and modification time, the frame count and, for a
        downscaled video, the size limit."""
        blob = f"{_identity(path)}|uniform|{self.num_frames}"
        if self.oversize(path):  # only a downscaled entry depends on max_side: runs of any max_side share the others
            blob += f"|max{self.max_side}"
        return hashlib.sha1(blob.encode()).hexdigest()

    def decode(self, path: str) -> torch.Tensor:
        """Decode the uniform frames of ``path`` (no cache): uint8 (num_frames, H, W, 3)."""
        frames = read_frames(path, self.indices(path))
        return pad_frames(limit_side(frames, self.max_side), self.num_frames)

    def get(self, path: str) -> torch.Tensor:
        """Cached uint8 (num_frames, H, W, 3) frames of ``path``."""
        path = os.fspath(path)
        if self.root is None:
            return self.decode(path)
        file = self.root / f"{self.key(path)}.npy"
        if (cached := load_cached(file, np.load)) is not None:
            return torch.from_numpy(cached)
        frames = self.decode(path)
        buf = io.BytesIO()
        np.save(buf, frames.numpy())
        save_cached(file, data=buf.getvalue())
        return frames

    def warm(self, paths: Sequence[str], description: str = "decoding videos", workers: int = 0) -> None:
        """Decode every missing entry (with a progress bar), in ``workers`` processes when > 0 (atomic writes)."""
        if self.root is None:
            return
        missing = [p for p in paths if not (self.root / f"{self.key(p)}.npy").exists()]
        if not missing:  # a warm cache: no "0 items" progress lines
            return
        if workers > 0 and len(missing) > 1:
            from torch.utils.data import DataLoader

            loader = DataLoader(missing, batch_size=None, num_workers=min(workers, len(missing)),
                                collate_fn=self._decode_entry, worker_init_fn=loader_worker_init)
            # a worker loader draws its base seed from torch's global generator: decoding must not move it, or the
            # worker count would change what is trained or adapted after it
            with fork_safe(), torch.random.fork_rng(devices=[]):
                for _ in progress_iter(loader, len(missing), description):
                    pass
            return
        for p in progress_iter(missing, len(missing), description):
            self.get(p)

    def _decode_entry(self, path: str) -> None:
        self.get(path)


def _identity(path: str, missing_ok: bool = False) -> str:
    """A video file as it is now: absolute path, size and modification time (``missing`` for an absent file when
    ``missing_ok``)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if not missing_ok:
            raise
        return f"{os.path.abspath(path)}|missing"
    return f"{os.path.abspath(path)}|{st.st_size}|{st.st_mtime_ns}"


def _read_json(path: Path):
    return json.loads(Path(path).read_text())


def run_frame_cache(cache: Path, num_frames: int, max_side: int | None = None) -> FrameCache:
    """The frame cache of a run or a perturbed copy: ``<cache>/frames``, ``data.num_frames`` frames, downscaled to
    ``inputs.max_side``. Runs and ``tta.perturb`` share it, so a copy holds the frames a run perturbs and the motion
    store's links serve both."""
    return FrameCache(cache / "frames", num_frames, max_side=max_side)


def limit_side(frames: torch.Tensor, max_side: int | None) -> torch.Tensor:
    """uint8 (T, H, W, 3) frames downscaled so that max(H, W) <= ``max_side`` (aspect kept; a no-op if within)."""
    if not max_side or max(frames.shape[1], frames.shape[2]) <= max_side:
        return frames
    h, w = frames.shape[1], frames.shape[2]
    scale = max_side / max(h, w)
    size = (max(1, round(h * scale)), max(1, round(w * scale)))
    out = []
    for chunk in frames.split(16):  # bounded float memory for long, huge clips
        x = chunk.permute(0, 3, 1, 2).float()
        x = torch.nn.functional.interpolate(x, size=size, mode="area")
        out.append(x.round_().clamp_(0, 255).to(torch.uint8).permute(0, 2, 3, 1))
    return torch.cat(out).contiguous()
