"""Video decoding to uint8 RGB frames at native resolution.

docs/shifts/mlvp.md: frames are decoded at native resolution as RGB, at the 12 "uniform" indices of
:func:`tta.media.frames.uniform_frame_indices` computed from the container's frame count; the CLIP transform
(:mod:`tta.media.transforms`) comes afterwards. The protocol uses the same frames for every evaluated video.

Decoding uses decord (``VideoReader(path, ctx=cpu(0), num_threads=1)``, ``get_batch(...).asnumpy()``; decord's
bridge is left at its native setting) and falls back to PyAV, which decodes sequentially and keeps the requested
frames, whenever decord fails to open or read the file. decord publishes wheels only for x86-64 Linux and Windows,
so it is not installed elsewhere (aarch64, macOS); PyAV then decodes everything. :func:`video_decoder` names the one
in use: each run logs it and records it in results.json (``provenance.decoder``).

Frame counts: the container's count (decord's ``len``, PyAV's ``stream.frames``) can exceed the number of frames
that actually decode by a few (the MLVP code has the same issue with OpenCV). Requested indices at or beyond the last
decodable frame are therefore clamped to it. A shortfall larger than :data:`MISSING_FRAMES_TOLERANCE` of the
container count (at least :data:`MISSING_FRAMES_MIN` frames) means a damaged file; with ``strict=True`` (default)
it raises :class:`VideoDecodeError`, with ``strict=False`` it is clamped with a warning.
"""

from __future__ import annotations

import functools
import logging
import math
import os
from collections.abc import Sequence
from typing import Union

import numpy as np
import torch

from tta.media.frames import uniform_frame_indices

__all__ = [
    "VideoDecodeError",
    "VideoNotFoundError",
    "video_frame_count",
    "video_header",
    "pixel_format_traits",
    "read_frames",
    "read_all_frames",
    "ensure_rgb",
    "decord_available",
    "video_decoder",
    "MISSING_FRAMES_TOLERANCE",
    "MISSING_FRAMES_MIN",
]

logger = logging.getLogger(__name__)

PathLike = Union[str, "os.PathLike[str]"]

#: Fraction of the container frame count that may fail to decode before a file counts as damaged.
MISSING_FRAMES_TOLERANCE = 0.05
#: Minimum number of missing frames always tolerated (container counts are often off by a few).
MISSING_FRAMES_MIN = 4

_REENCODE_HINT = (
    "The file may be truncated, corrupt or in an unsupported format; re-download it or re-encode it, e.g. "
    "`ffmpeg -i in.mp4 -c:v libx264 -pix_fmt yuv420p out.mp4`."
)


class VideoDecodeError(RuntimeError):
    """A video file could not be opened or decoded by decord nor by PyAV."""


class VideoNotFoundError(VideoDecodeError, FileNotFoundError):
    """The video file does not exist (both a :class:`VideoDecodeError` and a :class:`FileNotFoundError`)."""


def _check_exists(path: str) -> None:
    """Raises :class:`VideoNotFoundError` with a helpful message if ``path`` is not a file."""
    if not os.path.isfile(path):
        what = "is a directory, not a video file" if os.path.isdir(path) else "does not exist"
        raise VideoNotFoundError(
            f"Video file {path!r} {what}. Check the path and the data configuration (dataset root / videos_dir)."
        )


def ensure_rgb(frames: np.ndarray) -> np.ndarray:
    """Converts grayscale or RGBA frames to 3-channel uint8 RGB.

    Args:
        frames: ``(..., H, W)`` grayscale, or ``(..., H, W, C)`` with ``C`` in 1 (grayscale), 3 (RGB) or 4 (RGBA;
            alpha is dropped, not composited). A 2-D array is always treated as a single grayscale frame.

    Returns:
        A ``(..., H, W, 3)`` uint8 array (the input itself when it already is one).

    Raises:
        ValueError: For an unsupported channel count or rank.
    """
    a = np.asarray(frames)
    if a.dtype != np.uint8:
        raise ValueError(f"Expected uint8 frames, got dtype {a.dtype}.")
    if a.ndim == 2 or (a.ndim >= 3 and a.shape[-1] not in (1, 3, 4)):
        a = a[..., None]
    if a.ndim < 3:
        raise ValueError(f"Cannot interpret array of shape {a.shape} as frames.")
    c = a.shape[-1]
    if c == 1:
        return np.repeat(a, 3, axis=-1)
    if c == 4:
        return np.ascontiguousarray(a[..., :3])
    return a


def _as_index_list(indices: Sequence[int]) -> list[int]:
    """Converts indices (list, array or tensor) to a list of non-negative ints."""
    if isinstance(indices, torch.Tensor):
        indices = indices.tolist()
    out = [int(i) for i in np.asarray(indices).reshape(-1).tolist()]
    if not out:
        raise ValueError("No frame indices were requested.")
    bad = [i for i in out if i < 0]
    if bad:
        raise ValueError(f"Frame indices must be non-negative, got {bad[:5]}.")
    return out


@functools.cache
def decord_available() -> bool:
    """Whether decord imports (cached: a failed import would otherwise be retried for every video)."""
    try:
        import decord  # noqa: F401
    except Exception:  # noqa: BLE001 - no wheel for this platform, or a broken native library
        return False
    return True


@functools.cache
def video_decoder() -> str:
    """The decoder of ``backend="auto"`` with its version: ``"decord 0.6.0"`` (PyAV still reads the files decord
    cannot) or ``"pyav 12.0.0"`` where decord is not installed."""
    return f"decord {_version('decord')}" if decord_available() else f"pyav {_version('av')}"


def _version(module: str) -> str:
    try:
        return str(__import__(module).__version__)
    except Exception:  # noqa: BLE001 - PyAV is a hard dependency; a broken one fails later with its own error
        return "missing"


def _decord_reader(path: str):
    """Opens ``path`` with decord (CPU, one thread)."""
    if not decord_available():
        raise VideoDecodeError("decord is not installed (it has wheels for x86-64 Linux and Windows only); "
                               "use backend='pyav' or backend='auto'")
    import decord  # imported lazily: decord is optional

    return decord.VideoReader(path, ctx=decord.cpu(0), num_threads=1)


def _pyav_count(path: str) -> int:
    """Frame count from PyAV: the container's count, or the number of decoded frames if it has none."""
    import av

    with av.open(path) as container:
        if not container.streams.video:
            raise VideoDecodeError(f"{path!r} contains no video stream. {_REENCODE_HINT}")
        stream = container.streams.video[0]
        if stream.frames > 0:
            return int(stream.frames)
        return sum(1 for _ in container.decode(stream))


def video_frame_count(path: PathLike) -> int:
    """Returns the container frame count of a video (decord's ``len``; PyAV if decord cannot open it).

    Args:
        path: Video file.

    Returns:
        The frame count (may exceed the number of decodable frames by a few; see the module docstring).

    Raises:
        VideoNotFoundError: If the file does not exist.
        VideoDecodeError: If neither decord nor PyAV can open it.
    """
    path = os.fspath(path)
    _check_exists(path)
    if decord_available():
        try:
            return len(_decord_reader(path))
        except Exception as err:  # decord raises plain RuntimeError / DECORDError
            logger.debug("decord could not open %s (%s); trying PyAV", path, err)
    try:
        return _pyav_count(path)
    except VideoDecodeError:
        raise
    except Exception as err:
        raise VideoDecodeError(f"Could not read the frame count of {path!r}: {err}. {_REENCODE_HINT}") from err


def video_header(path: PathLike) -> tuple[int, int, str | None] | None:
    """``(height, width, pixel format)`` of the first video stream from the container header (no decoding);
    ``None`` if unknown."""
    try:
        import av

        with av.open(os.fspath(path)) as container:
            if not container.streams.video:
                return None
            ctx = container.streams.video[0].codec_context
            fmt = ctx.format.name if ctx.format is not None else None
            return (int(ctx.height), int(ctx.width), fmt) if ctx.height and ctx.width else None
    except Exception:  # noqa: BLE001 - a header PyAV cannot read: decoding will report the real problem
        return None


def pixel_format_traits(name: str | None) -> tuple[bool, bool]:
    """``(grayscale, has_alpha)`` of an FFmpeg pixel format (``gray``, ``ya8`` -> gray; ``rgba``, ``yuva420p`` ->
    alpha). Decoding makes every video 3-channel RGB: gray is replicated, alpha dropped (not composited)."""
    if not name:
        return False, False
    try:
        import av

        comps = av.VideoFormat(name).components
    except Exception:  # noqa: BLE001 - a format PyAV does not know: nothing to report
        return False, False
    colour = [c for c in comps if not c.is_alpha]
    gray = not name.startswith("pal") and len(colour) == 1 and colour[0].is_luma
    return gray, any(c.is_alpha for c in comps)


def _tolerance(count: int) -> int:
    """Number of frames that may be missing from a video whose container reports ``count`` frames."""
    return max(MISSING_FRAMES_MIN, math.ceil(MISSING_FRAMES_TOLERANCE * count))


def _read_decord(path: str, indices: list[int] | None, num_frames: int) -> np.ndarray:
    """Decodes the requested frames with decord (raises on any failure)."""
    vr = _decord_reader(path)
    count = len(vr)
    if count <= 0:
        raise VideoDecodeError("decord reports zero frames")
    if indices is None:
        indices = uniform_frame_indices(count, num_frames)
    clamped = [min(i, count - 1) for i in indices]
    if clamped != indices:
        logger.debug("%s: clamped indices beyond the frame count %d", path, count)
    return vr.get_batch(clamped).asnumpy()


def _read_pyav(path: str, indices: list[int] | None, num_frames: int, strict: bool) -> np.ndarray:
    """Decodes sequentially with PyAV and keeps the requested frames (clamping past the last decodable one)."""
    import av

    try:
        container = av.open(path)
    except Exception as err:
        raise VideoDecodeError(f"Could not open {path!r} with decord or PyAV: {err}. {_REENCODE_HINT}") from err
    with container:
        if not container.streams.video:
            raise VideoDecodeError(f"{path!r} contains no video stream. {_REENCODE_HINT}")
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        expected = int(stream.frames)
        if indices is None:
            if expected <= 0:  # no container count: decode everything once to count
                expected = sum(1 for _ in container.decode(stream))
                container.seek(0)
            if expected <= 0:
                raise VideoDecodeError(f"{path!r} has no decodable frames. {_REENCODE_HINT}")
            indices = uniform_frame_indices(expected, num_frames)
        wanted, last_needed = set(indices), max(indices)
        kept: dict[int, np.ndarray] = {}
        last: np.ndarray | None = None
        decoded, error = 0, None
        try:
            for frame in container.decode(stream):
                last = frame.to_ndarray(format="rgb24")
                if decoded in wanted:
                    kept[decoded] = last
                decoded += 1
                if decoded > last_needed:
                    break
        except Exception as err:  # truncated / corrupt stream: keep what decoded so far
            error = err
    if decoded == 0 or last is None:
        reason = f" ({error})" if error is not None else ""
        raise VideoDecodeError(f"No frame of {path!r} could be decoded{reason}. {_REENCODE_HINT}")
    if decoded <= last_needed:
        reference = max(expected, last_needed + 1)
        missing = reference - decoded
        msg = (
            f"{path!r}: only {decoded} of {reference} frames decode"
            + (f" (stopped with: {error})" if error is not None else "")
        )
        if strict and missing > _tolerance(reference):
            raise VideoDecodeError(f"{msg}; the file looks truncated or corrupt. {_REENCODE_HINT}")
        logger.warning("%s; clamping %d requested indices to frame %d", msg,
                       sum(i >= decoded for i in indices), decoded - 1)
    return np.stack([kept.get(i, last) if i < decoded else last for i in indices])


def read_frames(
    path: PathLike,
    indices: Sequence[int] | None = None,
    num_frames: int = 12,
    strict: bool = True,
    backend: str = "auto",
) -> torch.Tensor:
    """Decodes frames of a video as uint8 RGB at native resolution.

    Args:
        path: Video file.
        indices: Frame indices to decode (any order, repeats allowed). ``None`` uses
            ``uniform_frame_indices(frame_count, num_frames)`` on the container's frame count (MLVP rule).
        num_frames: Number of uniform frames when ``indices`` is ``None``.
        strict: If true, a file whose decodable frames fall short of the requested indices by more than the
            tolerance (see the module docstring) raises; if false the indices are clamped with a warning.
        backend: ``"auto"`` (decord, falling back to PyAV; PyAV alone where decord is not installed), ``"decord"``
            or ``"pyav"`` (for tests and debugging).

    Returns:
        A ``(n, H, W, 3)`` uint8 tensor (RGB; grayscale and RGBA sources are converted).

    Raises:
        VideoNotFoundError: If the file does not exist.
        VideoDecodeError: If no frame decodes or the file is damaged beyond the tolerance.
        ValueError: For negative or empty ``indices`` or an unknown ``backend``.
    """
    if backend not in ("auto", "decord", "pyav"):
        raise ValueError(f"Unknown backend {backend!r}; expected 'auto', 'decord' or 'pyav'.")
    path = os.fspath(path)
    _check_exists(path)
    idx = None if indices is None else _as_index_list(indices)
    frames = None
    if backend == "decord" or (backend == "auto" and decord_available()):
        try:
            frames = _read_decord(path, idx, num_frames)
        except Exception as err:
            if backend == "decord":
                raise VideoDecodeError(f"decord could not decode {path!r}: {err}. {_REENCODE_HINT}") from err
            logger.debug("decord failed on %s (%s); falling back to PyAV", path, err)
    if frames is None:
        frames = _read_pyav(path, idx, num_frames, strict)
    frames = ensure_rgb(frames)
    return torch.from_numpy(np.ascontiguousarray(frames))


def read_all_frames(path: PathLike, backend: str = "auto") -> tuple[torch.Tensor, float]:
    """Decodes **every** frame of a video (MLVP group B, docs/shifts/mlvp.md).

    Group-B shifts (H.264, flow-driven blurs, temporal scrambling) work from the whole decoded video and take the
    uniform frames over the *decoded* count, which can differ from the container's count by a few frames.
    ``"auto"`` tries decord first (the same FFmpeg decode and RGB conversion, faster than PyAV's frame loop:
    docs/results/shift-speed.md); decord refuses a truncated or damaged stream outright, and PyAV then decodes what it can, sequentially.

    Args:
        path: Video file.
        backend: ``"auto"`` (decord, falling back to PyAV; PyAV alone where decord is not installed, decord alone
            where PyAV is not), ``"decord"`` or ``"pyav"``.

    Returns:
        ``(frames, fps)``: uint8 ``(T, H, W, 3)`` RGB frames and the stream's average frame rate (30.0 if unknown).

    Raises:
        VideoNotFoundError: If the file does not exist.
        VideoDecodeError: If the file cannot be opened or no frame decodes.
        ValueError: For an unknown ``backend``.
    """
    if backend not in ("auto", "decord", "pyav"):
        raise ValueError(f"Unknown backend {backend!r}; expected 'auto', 'decord' or 'pyav'.")
    path = os.fspath(path)
    _check_exists(path)
    if backend == "decord" or (backend == "auto" and decord_available()):
        try:
            return _read_all_decord(path)
        except VideoDecodeError as err:
            if backend == "decord":
                raise
            logger.debug("decord could not decode all of %s (%s); decoding with PyAV", path, err)
    try:
        import av
    except ImportError:
        if backend == "auto" and decord_available():  # decord already failed on this file
            raise VideoDecodeError(f"decord could not decode {path!r} and PyAV is not installed. "
                                   f"{_REENCODE_HINT}") from None
        raise
    try:
        container = av.open(path)
    except Exception as err:
        raise VideoDecodeError(f"Could not open {path!r} with PyAV: {err}. {_REENCODE_HINT}") from err
    frames: list[np.ndarray] = []
    with container:
        if not container.streams.video:
            raise VideoDecodeError(f"{path!r} contains no video stream. {_REENCODE_HINT}")
        stream = container.streams.video[0]
        fps = float(stream.average_rate) if stream.average_rate else 30.0
        try:
            for frame in container.decode(stream):
                frames.append(frame.to_ndarray(format="rgb24"))
        except Exception as err:  # truncated stream: keep what decoded
            if not frames:
                raise VideoDecodeError(f"No frame of {path!r} could be decoded ({err}). {_REENCODE_HINT}") from err
            logger.warning("%s: decoding stopped after %d frames (%s)", path, len(frames), err)
    if not frames:
        raise VideoDecodeError(f"{path!r} has no decodable frames. {_REENCODE_HINT}")
    return torch.from_numpy(ensure_rgb(np.stack(frames))), fps


def _read_all_decord(path: str) -> tuple[torch.Tensor, float]:
    """Every frame through decord, or one ``VideoDecodeError`` (a truncated or damaged stream included)."""
    try:
        vr = _decord_reader(path)
        count = len(vr)
        if count <= 0:
            raise VideoDecodeError("decord reports zero frames")
        frames = vr.get_batch(list(range(count))).asnumpy()
        fps = float(vr.get_avg_fps() or 30.0)
    except VideoDecodeError as err:
        raise VideoDecodeError(f"{path!r} has no decodable frames ({err}). {_REENCODE_HINT}") from err
    except Exception as err:  # noqa: BLE001 - decord raises plain RuntimeError / DECORDError
        raise VideoDecodeError(f"decord could not decode {path!r}: {err}. {_REENCODE_HINT}") from err
    return torch.from_numpy(ensure_rgb(frames)), fps
