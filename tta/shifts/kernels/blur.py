"""The flow blurs' arithmetic, faster than the reference's calls and with its results
(:mod:`tta.shifts.video.flow_blur`): NumPy's percentile from one partition, filter2D's correlation of large kernels
without its DFT where they are sparse and through one shared DFT where they are dense, the masked blend with one
rounding, and their torch forms for frames on a GPU. The bounds are stated per function and checked in
tests/shifts/kernels/test_blur.py; docs/results/shift-speed.md has the timings."""

from __future__ import annotations

import math

import cv2
import numpy as np
import torch


def percentile_linear(values: np.ndarray, q: float) -> float:
    """``np.percentile(values, q)`` (method linear) to the bit, from one partition and a minimum.

    NumPy partitions around both neighbours of the virtual index (n - 1)·q/100 and the two ends; one kth and the
    minimum of the part above it give the same two order statistics with less work. The
    interpolation is NumPy's ``_lerp`` (from the upper neighbour when the weight is >= 0.5). Non-finite input
    goes to NumPy itself.
    """
    v = values.ravel()
    if not np.isfinite(v).all():
        return float(np.percentile(values, q))
    index = (v.size - 1) * (q / 100)
    lo = math.floor(index)
    if lo >= v.size - 1:
        return float(v.max())
    part = np.partition(v, lo)
    a, b, t = float(part[lo]), float(part[lo + 1:].min()), index - lo
    return b - (b - a) * (1 - t) if t >= 0.5 else a + (b - a) * t


def _correlate(frame: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    return cv2.filter2D(frame, -1, kernel, borderType=cv2.BORDER_REFLECT_101)


#: kernel area from which OpenCV's filter2D correlates uint8 images through a DFT; below it, direct filter2D wins
DFT_MIN_AREA = 130


def _kernel_spectrum(kernel: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """DFT (OpenCV CCS layout) of ``kernel`` placed with its centre at the origin of a zero plane of ``shape``."""
    plane = np.zeros(shape, np.float32)
    r = kernel.shape[0] // 2
    plane[np.ix_((np.arange(kernel.shape[0]) - r) % shape[0], (np.arange(kernel.shape[1]) - r) % shape[1])] = kernel
    return cv2.dft(plane)


#: a large kernel with at most this share of non-zero taps (a rotated line: <= 17 % from length 13) is correlated
#: directly, visiting only those taps; denser ones (the defocus disks) through the shared DFT
SPARSE_SHARE = 0.25


def _is_sparse(kernel: np.ndarray) -> bool:
    return np.count_nonzero(kernel) <= SPARSE_SHARE * kernel.size


def _sparse_correlate(padded: np.ndarray, pad: int, kernel: np.ndarray, h: int, w: int) -> np.ndarray:
    """float32 (h, w, 3) correlation of a frame, given as float32 padded by ``pad`` (reflect-101), with a large,
    mostly-zero kernel.

    OpenCV's direct filter2D visits only the non-zero taps, but it switches to a DFT from an area of 130; so the
    kernel's non-zero bounding box is cut into bands of rows below that area, each correlated directly (anchor at its
    top-left, over the window of the padded frame it reaches) and the bands summed in float32; the float sums differ
    from filter2D's DFT by rounding only.
    """
    ys, xs = np.nonzero(kernel)
    r0, r1, c0, c1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
    box = kernel[r0:r1, c0:c1]
    rows = max(1, (DFT_MIN_AREA - 1) // box.shape[1])
    centre = kernel.shape[0] // 2
    out = None
    for b in range(0, box.shape[0], rows):
        band = np.ascontiguousarray(box[b:b + rows])
        top, left = pad + r0 + b - centre, pad + c0 - centre
        view = padded[top:top + h + band.shape[0] - 1, left:left + w + band.shape[1] - 1]
        y = cv2.filter2D(view, -1, band, anchor=(0, 0), borderType=cv2.BORDER_CONSTANT)[:h, :w]
        out = y if out is None else cv2.add(out, y)
    return out


class _Blurs:
    """Each blur of one frame, unrounded: uint8 from filter2D for small kernels (< 130 taps, exact), float32 from
    :func:`_sparse_correlate` for large sparse ones, float32 from a forward DFT per plane shared by all large dense
    ones (reflect-101 padding by their largest radius, float32 spectra cached per kernel object)."""

    def __init__(self, shape: tuple[int, int], kernel_sets: list[list[np.ndarray]]):
        self.h, self.w = shape
        large = [k for ks in kernel_sets for k in ks if k.size >= DFT_MIN_AREA]
        dense = [k for k in large if not _is_sparse(k)]
        self.pad_sparse = max((k.shape[0] // 2 for k in large if _is_sparse(k)), default=0)
        self.pad_dense = max((k.shape[0] // 2 for k in dense), default=0)
        r = self.pad_dense
        self.dft_shape = (cv2.getOptimalDFTSize(self.h + 2 * r), cv2.getOptimalDFTSize(self.w + 2 * r))
        self.plane = np.zeros(self.dft_shape, np.float32)  # the padded plane; only its top-left part is rewritten
        self.spectra: dict[int, np.ndarray] = {}  # one spectrum per distinct kernel object (defocus shares them)

    def __call__(self, frame: np.ndarray, kernels: list[np.ndarray]) -> list[np.ndarray]:
        h, w = self.h, self.w
        outs: list = [None] * len(kernels)
        dense = []
        padded = None
        for i, k in enumerate(kernels):
            if k.size < DFT_MIN_AREA:
                outs[i] = _correlate(frame, k)
            elif _is_sparse(k):
                if padded is None:
                    p = self.pad_sparse
                    padded = cv2.copyMakeBorder(frame, p, p, p, p, cv2.BORDER_REFLECT_101).astype(np.float32)
                outs[i] = _sparse_correlate(padded, self.pad_sparse, k, h, w)
            else:
                dense.append(i)
        if dense:
            r, plane = self.pad_dense, self.plane
            planes = {i: [] for i in dense}
            for chan in cv2.split(frame):
                plane[:h + 2 * r, :w + 2 * r] = cv2.copyMakeBorder(chan, r, r, r, r, cv2.BORDER_REFLECT_101)
                freq = cv2.dft(plane)
                for i in dense:
                    k = kernels[i]
                    if id(k) not in self.spectra:
                        self.spectra[id(k)] = _kernel_spectrum(k, self.dft_shape)
                    y = cv2.idft(cv2.mulSpectrums(freq, self.spectra[id(k)], 0, conjB=True),
                                 flags=cv2.DFT_SCALE | cv2.DFT_REAL_OUTPUT)
                    planes[i].append(y[r:r + h, r:r + w])
            for i in dense:
                outs[i] = cv2.merge(planes[i])
        return outs


def _round(x: np.ndarray) -> np.ndarray:
    """float -> uint8 as filter2D's output: round half to even, saturate (uint8 passes through)."""
    return x if x.dtype == np.uint8 else cv2.add(x, 0.0, dtype=cv2.CV_8U)


def correlate_pair(frames: np.ndarray, kernel_sets: list[list[np.ndarray]]) -> list[np.ndarray]:
    """uint8 (n, H, W, 3) frames and, for each blur, one kernel per frame -> one uint8 (n, H, W, 3) per blur.

    The result of ``filter2D`` (reflect-101 border, rounded) frame by frame, computed as :class:`_Blurs` does:
    exactly for small kernels, within 1 grey level on rounding ties for large ones (filter2D's own DFT path rounds
    its float results too).
    """
    blurs = _Blurs(frames.shape[1:3], kernel_sets)
    outs = [np.empty_like(frames) for _ in kernel_sets]
    for j, frame in enumerate(frames):
        for out, y in zip(outs, blurs(frame, [ks[j] for ks in kernel_sets]), strict=True):
            out[j] = _round(y)
    return outs


def blur_blend(frames: np.ndarray, highs: list[np.ndarray], lows: list[np.ndarray] | None,
               masks: np.ndarray) -> np.ndarray:
    """``masks ? correlate(frame, high) : correlate(frame, low)`` (or the frame itself when ``lows`` is None) for
    uint8 (n, H, W, 3) frames, one kernel per frame and blur, boolean (n, H, W) masks -> uint8 (n, H, W, 3).

    The pixels of :func:`correlate_pair` followed by the masked copy, bit for bit, with less work: the mask picks
    between the two float results before the single rounding (rounding commutes with the choice), and the rounding
    and the masked copy are OpenCV calls (``cv2.add(..., dtype=CV_8U)`` rounds half to even and saturates, as
    filter2D's uint8 output and ``np.rint`` + clip do).
    """
    sets = [highs] if lows is None else [highs, lows]
    blurs = _Blurs(frames.shape[1:3], sets)
    masks = np.ascontiguousarray(masks).view(np.uint8)
    out = np.empty_like(frames)
    for j, frame in enumerate(frames):
        ys = blurs(frame, [ks[j] for ks in sets])
        high, low = ys[0], ys[1] if len(ys) > 1 else frame.copy()  # copyTo writes into low
        if high.dtype == low.dtype:  # both float (or both uint8): pick, then round once
            out[j] = _round(cv2.copyTo(high, masks[j], low))
        elif high.dtype == np.uint8:
            out[j] = cv2.copyTo(high, masks[j], _round(low))
        else:  # a float high blur over a uint8 low one (a small kernel, or the frame itself)
            out[j] = cv2.copyTo(_round(high), masks[j], low)
    return out


def correlate_torch(frames: torch.Tensor, kernels: list[np.ndarray]) -> torch.Tensor:
    """uint8 (n, H, W, 3) frames, one kernel per frame -> uint8 (n, H, W, 3): one grouped convolution on their device."""
    n, h, w, _ = frames.shape
    size = max(k.shape[0] for k in kernels)
    bank = np.zeros((n, size, size), np.float32)
    for i, k in enumerate(kernels):  # centre smaller kernels in a common odd size
        o = (size - k.shape[0]) // 2
        bank[i, o:o + k.shape[0], o:o + k.shape[1]] = k
    weight = torch.from_numpy(bank).to(frames.device).repeat_interleave(3, 0)[:, None]
    x = frames.permute(0, 3, 1, 2).reshape(1, n * 3, h, w).to(torch.float32)
    r = size // 2
    x = torch.nn.functional.pad(x, (r, r, r, r), mode="reflect")  # torch's reflect is OpenCV's reflect-101
    y = torch.nn.functional.conv2d(x, weight, groups=n * 3).round_().clamp_(0, 255)
    return y.to(torch.uint8).reshape(n, 3, h, w).permute(0, 2, 3, 1)


def blend_torch(sampled: torch.Tensor, highs: list[np.ndarray], lows: list, masks: torch.Tensor) -> torch.Tensor:
    """``masks ? high blur : low blur`` (or the frame where the low kernels are None) of uint8 (n, H, W, 3) frames,
    the blurs grouped convolutions on the frames' device."""
    high = correlate_torch(sampled, highs)
    low = sampled if lows[0] is None else correlate_torch(sampled, lows)
    return torch.where(masks[..., None], high, low)


def rgb_to_grey(frames: torch.Tensor) -> torch.Tensor:
    """uint8 (..., 3) RGB -> uint8 (...) grey, OpenCV's ``COLOR_RGB2GRAY`` to the bit (its 15-bit fixed point)."""
    x = frames.to(torch.int32)
    return ((x[..., 0] * 9798 + x[..., 1] * 19235 + x[..., 2] * 3735 + 16384) >> 15).to(torch.uint8)


def masks_from_flows(flows: torch.Tensor, q: float) -> torch.Tensor:
    """float32 (n, H, W, 2) flows -> boolean (n, H, W) masks of magnitudes >= their ``q``-th percentile:
    :func:`tta.shifts.video.flow_blur.high_motion_mask` on the flows' device.

    The magnitudes are the same float64 numbers as NumPy's, and the threshold takes the same two order statistics
    and interpolation as :func:`percentile_linear`, so the masks are the CPU's for the same flows.
    """
    mag = torch.sqrt(flows[..., 0].double() ** 2 + flows[..., 1].double() ** 2)
    flat = mag.reshape(mag.shape[0], -1)
    index = (flat.shape[1] - 1) * (q / 100)
    lo = math.floor(index)
    ordered = torch.sort(flat, dim=1).values
    pairs = ordered[:, lo:lo + 2].cpu().tolist()
    t = index - lo
    thresholds = [b - (b - a) * (1 - t) if t >= 0.5 else a + (b - a) * t for a, b in pairs]
    return mag >= torch.tensor(thresholds, dtype=torch.float64, device=mag.device)[:, None, None]
