"""Disk store of the flow blurs' per-clip motion, shared by every run that blurs the same frames.

What motion blur and video defocus keep of the dense flow (each sampled frame's high-motion mask and mean flow)
depends on the clean frames and the flow settings only, not on the severity, the seed or the adapter, so a sweep
would compute the same flows many times; this store computes them once per clip. Entries are keyed by the bytes of
the frames the flow reads, the flow settings and the implementation that computed them (whose last bits may
differ), and a hit returns exactly what the computation would. Links from frame-cache clips to their entries let a
warm run skip decoding the whole video, which finding the key would need. Key, sizes and costs:
docs/shifts/mlvp.md, "Motion store" and "Links from the frame cache".
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from tta.utils.io import load_cached, save_cached

log = logging.getLogger(__name__)


class ClipMotion(NamedTuple):
    """What the flow blurs keep of a clip's flows.

    Attributes:
        masks: bool (n, H, W), the high-motion mask of each sampled frame at the frames' size.
        means: float64 (n, 2), each flow's NumPy float32 mean (x, y), widened exactly (motion blur's angle).
    """

    masks: np.ndarray
    means: np.ndarray


def flow_frames(indices: Sequence[int]) -> list[int]:
    """The frame indices the flows of the sampled ``indices`` read: t-1 and t for every t > 0 (t = 0 has zero flow)."""
    return sorted({i for t in indices if t > 0 for i in (t - 1, t)})


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


class MotionStore:
    """Content-keyed store of :class:`ClipMotion` under ``root`` (one small uncompressed ``.npz`` per clip and
    setting: the packed masks barely compress, and zlib cost more than the rest of a write)."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self._warned = False

    @staticmethod
    def key(frames, indices: Sequence[int], size: tuple[int, int], setting: str) -> str:
        """Digest of the frames the flows of the sampled ``indices`` read (``frames``: uint8 (T, H, W, 3), or a
        mapping index -> frame holding at least those), the indices, the frame ``size`` (H, W; it names clips whose
        flows read no frame) and ``setting`` (method, scale, parameters, implementation)."""
        h = hashlib.sha1()  # not adversarial; OpenSSL's SHA-1 hashes frames about twice as fast as BLAKE2b here
        h.update(f"{setting}|{list(indices)}|{tuple(size)}".encode())
        for i in flow_frames(indices):
            frame = np.ascontiguousarray(frames[i])
            h.update(f"|{i}:{frame.shape}:{frame.dtype}|".encode())
            h.update(memoryview(frame).cast("B"))
        return h.hexdigest()

    def _file(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.npz"

    def load(self, key: str, n: int, size: tuple[int, int]) -> ClipMotion | None:
        """The stored motion of ``key`` if it holds ``n`` masks of ``size`` (H, W), else None (absent or damaged)."""
        data = load_cached(self._file(key), _read_npz)
        if data is None:
            return None
        try:
            shape = tuple(int(s) for s in data["shape"])
            if shape != (n, *size) or data["means"].shape != (n, 2):
                return None
            masks = np.unpackbits(data["masks"], count=n * size[0] * size[1]).reshape(shape).astype(bool)
            return ClipMotion(masks, data["means"].astype(np.float64))
        except (KeyError, ValueError):
            return None

    def save(self, key: str, motion: ClipMotion) -> None:
        """Write ``motion`` under ``key`` (atomic; concurrent writers of one key write the same bytes); a failed write
        is one warning per store."""
        buf = io.BytesIO()
        np.savez(buf, masks=np.packbits(motion.masks.ravel()), shape=np.array(motion.masks.shape),
                 means=np.asarray(motion.means, np.float64))
        self._write(self._file(key), buf.getvalue())

    @staticmethod
    def link_key(clip_key: str, n: int, setting: str) -> str:
        """The link's name for the frame cache's clip ``clip_key`` of ``n`` frames under the flow ``setting``."""
        return hashlib.sha1(f"link|{clip_key}|{n}|{setting}".encode()).hexdigest()

    def _link_file(self, link: str) -> Path:
        return self.root / "links" / link[:2] / f"{link}.txt"

    def link(self, clip_key: str, n: int, setting: str, key: str) -> None:
        """Record that the frame cache's clip ``clip_key`` (``n`` frames) has the motion of entry ``key`` under
        ``setting``; the caller has checked that its frames are the ones the entry's flows sampled."""
        self._write(self._link_file(self.link_key(clip_key, n, setting)), key.encode())

    def linked(self, clip_key: str, n: int, size: tuple[int, int], setting: str) -> ClipMotion | None:
        """The motion linked to the frame cache's clip ``clip_key`` under ``setting``, or None (no link, or its
        entry is absent or damaged)."""
        key = load_cached(self._link_file(self.link_key(clip_key, n, setting)), lambda p: p.read_text().strip())
        if key is None or len(key) != 40 or any(c not in "0123456789abcdef" for c in key):
            return None
        return self.load(key, n, size)

    def _write(self, file: Path, data: bytes) -> None:
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
            save_cached(file, data=data)
        except OSError as e:  # a full or read-only disk costs speed, never the run: the output does not depend on it
            if not self._warned:
                log.warning("motion store %s not writable (%s); flows are computed without it", self.root, e)
                self._warned = True
