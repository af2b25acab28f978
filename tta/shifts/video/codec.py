"""Low-level codec shift of MLVP: H.264 compression (docs/shifts/mlvp.md, App. E.1; Alg. 1), a real libx264 round trip.

Bitrate_s = 500k, 250k, 100k, 50k, 25k bit/s (Table 37). Group B: the shift receives **every** decoded frame of
the video and its frame rate, encodes them single-pass with libx264 at the target bitrate (ABR; preset ``fast``;
no CRF, GOP, maxrate or tune options; ``yuv444p``, which is ffmpeg's automatic choice for the reference code's
BGR input), decodes the stream again and returns all decoded frames; the pipeline then takes the uniform frames
over the decoded count (docs/shifts/mlvp.md, frames) and pads with the last frame. Everything happens in memory with PyAV (its wheel
bundles libx264); ``threads=1`` by default.

Reproducibility: with the code's rate control (mbtree, lookahead 30) x264 is **not** bit-reproducible when the
CPU is contended, even with one thread (docs/results/shift-speed.md). ``x264_params="rc-lookahead=0:mbtree=0"``
makes it reproducible at the price of a different rate control than the
reference code, so it is an option, not the default. The bitrate is absolute whatever the resolution or fps,
and very low targets overshoot on short clips: :func:`h264_roundtrip` returns the achieved bitrate, which is
logged at debug level.
"""

from __future__ import annotations

import io
import logging
from fractions import Fraction

import numpy as np
import torch

from tta.shifts.registry import register_video_shift
from tta.shifts.video.common import ShiftContext
from tta.utils.bounds import Int

log = logging.getLogger(__name__)

H264_BITRATE = (500_000, 250_000, 100_000, 50_000, 25_000)  # bit/s, Table 37
DEFAULT_FPS = 30.0


def h264_roundtrip(frames: np.ndarray, bitrate: int, fps: float, pix_fmt: str = "yuv444p", preset: str = "fast",
                   threads: int = 1, x264_params: str = "") -> tuple[np.ndarray, float]:
    """Encode uint8 RGB (T, H, W, 3) frames with libx264 at ``bitrate`` bit/s and decode them again.

    Returns:
        (decoded uint8 (T', H, W, 3) frames, achieved bitrate in bit/s = encoded stream bits / (T / fps)).
    """
    import av

    t, h, w, _ = frames.shape
    if pix_fmt in ("yuv420p", "nv12") and (h % 2 or w % 2):
        raise ValueError(f"h264 pix_fmt={pix_fmt} needs even frame sizes, got {h}x{w}; use yuv444p")
    rate = Fraction(fps).limit_denominator(1001)
    buf = io.BytesIO()
    payload = 0
    with av.open(buf, mode="w", format="mp4") as out:
        stream = out.add_stream("libx264", rate=rate)
        stream.width, stream.height, stream.pix_fmt = w, h, pix_fmt
        stream.bit_rate = int(bitrate)
        stream.options = {"preset": preset, **({"x264-params": x264_params} if x264_params else {})}
        stream.codec_context.thread_count = int(threads)
        for i, arr in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(arr), format="rgb24")
            frame.pts = i
            for packet in stream.encode(frame):
                payload += packet.size
                out.mux(packet)
        for packet in stream.encode():
            payload += packet.size
            out.mux(packet)
    buf.seek(0)
    with av.open(buf, mode="r") as inp:
        decoded = [f.to_ndarray(format="rgb24") for f in inp.decode(video=0)]
    if not decoded:
        raise RuntimeError("libx264 round trip decoded no frame")
    achieved = 8.0 * payload / (t / float(fps))
    return np.stack(decoded), achieved


@register_video_shift("h264_compression", level="low", group="B", bounds={"threads": Int(1)})
def h264_compression(frames: torch.Tensor, severity: int, generator: torch.Generator, context: ShiftContext | None = None,
                     pix_fmt: str = "yuv444p", threads: int = 1, preset: str = "fast",
                     bitrates: list | tuple | None = None, x264_params: str = "") -> torch.Tensor:
    """frames: every decoded frame, uint8 (T, H, W, 3) -> the decoded H.264 stream, uint8 (T', H, W, 3) (docs/shifts/mlvp.md, App. E.1).

    ``bitrates`` replaces the severity table (e.g. the code's commented-out 1000k, 500k, 250k, 150k, 100k).
    No randomness (the generator is unused). The frame rate comes from ``context.fps`` (the container's).
    """
    table = tuple(bitrates) if bitrates else H264_BITRATE
    fps = context.fps if context is not None and context.fps else None
    if fps is None:
        log.debug("h264_compression: no frame rate given; assuming %.0f fps", DEFAULT_FPS)
        fps = DEFAULT_FPS
    out, achieved = h264_roundtrip(frames.cpu().numpy(), int(table[severity - 1]), fps, pix_fmt, preset, threads,
                                   x264_params)
    log.debug("h264 %s: target %d bit/s, achieved %.0f bit/s over %d frames",
              getattr(context, "video_id", "?"), table[severity - 1], achieved, len(out))
    return torch.from_numpy(out).to(frames.device)
