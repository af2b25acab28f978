"""Digital perturbations of Schiappa et al. (NeurIPS 2022 D&B, Sec. 3.1): JPEG, MPEG1 and MPEG2 compression.

All three are real codecs: JPEG per sampled frame (group A; libjpeg-turbo through OpenCV on the CPU, the same
pixels as Pillow, and an exact tensor re-implementation on CUDA), MPEG1 and MPEG2 over the whole video (group B)
with PyAV's FFmpeg at a fixed quantiser scale. ``codec`` and ``scale`` choose between the paper's codecs and the
authors' code, whose quantisers saturate at FFmpeg's ceiling (docs/shifts/schiappa-video.md, "Digital").
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import torch

from tta.shifts.kernels.jpeg_batch import jpeg_roundtrip_batch
from tta.shifts.registry import register_batched, register_video_shift

JPEG_QUALITY = (25, 18, 15, 10, 7)
MPEG_QSCALE = {
    "mpeg1": {"monotone": (20, 23, 26, 28, 31), "code": (20, 31, 31, 31, 31)},
    "mpeg2": {"monotone": (15, 19, 23, 27, 31), "code": (15, 30, 31, 31, 31)},
}
MPEG_CODEC = {"mpeg1": "mpeg1video", "mpeg2": "mpeg2video"}
MPEG_CODEC_OF_CODE = {"mpeg1": "mpeg2video", "mpeg2": "mpeg4"}
MPEG_FPS = 25  # a legal MPEG-1 frame rate; with a fixed quantiser the rate does not change the pictures


@register_video_shift("schiappa_jpeg", level="low")
def jpeg(frames: torch.Tensor, severity: int, generator: torch.Generator) -> torch.Tensor:
    """Per-frame JPEG at quality 25/18/15/10/7. frames: uint8 (T, H, W, 3) -> same shape.

    The authors save with Pillow; OpenCV's encoder and decoder (libjpeg-turbo as well, same IJG quantisation
    tables, 4:2:0, islow DCT) give the same bytes back at about twice the speed, without file objects
    (``tests/shifts/video/test_shift_fast_paths.py`` checks the equality against Pillow).
    """
    import cv2

    params = [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY[severity - 1]]
    out = np.empty_like(frames.cpu().numpy())
    for src, dst in zip(frames.cpu().numpy(), out, strict=True):
        ok, buf = cv2.imencode(".jpg", cv2.cvtColor(src, cv2.COLOR_RGB2BGR), params)
        if not ok:
            raise RuntimeError("OpenCV could not encode a frame as JPEG")
        cv2.cvtColor(cv2.imdecode(buf, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB, dst=dst)
    return torch.from_numpy(out).to(frames.device)


@register_batched("schiappa_jpeg", exact=True, cpu=False)
def jpeg_batch(frames: torch.Tensor, severity: int, generators) -> torch.Tensor:
    """uint8 (N, T, H, W, 3) -> the same, all frames at once on their device: libjpeg's lossy steps in integer
    tensor code (:mod:`tta.shifts.kernels.jpeg_batch`), the same pixels as :func:`jpeg`. Used on CUDA; on the CPU
    libjpeg-turbo is faster, so ``backend=auto`` keeps :func:`jpeg` there."""
    n, t = frames.shape[:2]
    out = jpeg_roundtrip_batch(frames.reshape(n * t, *frames.shape[2:]), JPEG_QUALITY[severity - 1])
    return out.reshape(frames.shape)


def mpeg_roundtrip(frames: np.ndarray, codec: str, qscale: int) -> np.ndarray:
    """Encode uint8 (T, H, W, 3) RGB frames with ``codec`` at a fixed quantiser and decode them (in memory).

    Args:
        frames: uint8 (T, H, W, 3).
        codec: an FFmpeg encoder name (``mpeg1video``, ``mpeg2video``, ``mpeg4``).
        qscale: quantiser scale 1..31.

    Returns:
        uint8 (T, H, W, 3), the decoded pictures in display order.
    """
    import av

    if not 1 <= int(qscale) <= 31:
        raise ValueError(f"qscale must be in 1..31 (the MPEG quantiser_scale range; FFmpeg clips -q:v to qmax 31), "
                         f"got {qscale}")
    t, h, w, _ = frames.shape
    ph, pw = h + h % 2, w + w % 2
    if (ph, pw) != (h, w):
        frames = np.pad(frames, ((0, 0), (0, ph - h), (0, pw - w), (0, 0)), mode="edge")
    enc = av.CodecContext.create(codec, "w")
    enc.width, enc.height, enc.pix_fmt = pw, ph, "yuv420p"
    enc.time_base = Fraction(1, MPEG_FPS)
    enc.framerate = Fraction(MPEG_FPS, 1)
    enc.options = {"qmin": str(qscale), "qmax": str(qscale), "threads": "1"}
    packets = []
    for i, frame in enumerate(frames):
        vf = av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24")
        vf.pts = i
        packets.extend(enc.encode(vf))
    packets.extend(enc.encode(None))
    dec = av.CodecContext.create(codec, "r")
    dec.options = {"threads": "1"}
    decoded = []
    for packet in packets:
        decoded.extend(f.to_ndarray(format="rgb24") for f in dec.decode(packet))
    decoded.extend(f.to_ndarray(format="rgb24") for f in dec.decode(None))
    if len(decoded) != t:
        raise RuntimeError(f"{codec} round trip returned {len(decoded)} frames for {t}; the FFmpeg build in PyAV "
                           "may lack this codec: reinstall PyAV (pip install --force-reinstall av)")
    return np.stack(decoded)[:, :h, :w]


def _mpeg(frames: torch.Tensor, severity: int, which: str, scale: str, codec: str) -> torch.Tensor:
    if scale not in MPEG_QSCALE[which]:
        raise ValueError(f"scale must be one of {sorted(MPEG_QSCALE[which])}, got {scale!r}")
    if codec == "default":
        codec = MPEG_CODEC[which]
    elif codec == "code":
        codec = MPEG_CODEC_OF_CODE[which]
    q = MPEG_QSCALE[which][scale][severity - 1]
    out = mpeg_roundtrip(frames.cpu().numpy(), codec, q)
    return torch.from_numpy(out).to(frames.device)


@register_video_shift("schiappa_mpeg1", level="low", group="B")
def mpeg1(frames: torch.Tensor, severity: int, generator: torch.Generator, scale: str = "monotone",
          codec: str = "default") -> torch.Tensor:
    """MPEG-1 encode/decode of the whole video at a fixed quantiser. uint8 (T, H, W, 3) -> same shape.

    ``codec``: ``default`` (mpeg1video), ``code`` (the authors' mpeg2video) or any FFmpeg encoder name.
    """
    return _mpeg(frames, severity, "mpeg1", scale, codec)


@register_video_shift("schiappa_mpeg2", level="low", group="B")
def mpeg2(frames: torch.Tensor, severity: int, generator: torch.Generator, scale: str = "monotone",
          codec: str = "default") -> torch.Tensor:
    """MPEG-2 encode/decode of the whole video at a fixed quantiser. uint8 (T, H, W, 3) -> same shape.

    ``codec``: ``default`` (mpeg2video), ``code`` (the authors' mpeg4) or any FFmpeg encoder name.
    """
    return _mpeg(frames, severity, "mpeg2", scale, codec)
