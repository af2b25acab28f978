"""Mid-level, motion-driven blurs of MLVP: motion blur and video defocus (docs/shifts/mlvp.md, App. E.2).

Group B, one shared driver (Alg. 2): the shift receives every decoded frame, takes the uniform frame indices over
the decoded count (docs/shifts/mlvp.md, frames) and, for each sampled index t, computes OpenCV Farneback dense flow from grey frame t-1
to grey frame t at full resolution (pyr_scale 0.5, levels 3, winsize 15, iterations 3, poly_n 5, poly_sigma 1.2;
zero flow for t = 0). Pixels whose flow magnitude reaches the frame's 75th percentile (linear interpolation) form
a hard high-motion mask M; the output is ``M ? blur_high(frame) : blur_low(frame)``, each blur a 2-D correlation of
the whole uint8 frame (same kernel on all channels, reflect-101 border, rounded). For t = 0 the flow is zero, so
thr = 0, M ≡ 1 and the whole frame gets the high kernel (angle 0). The shift returns the ``num_frames`` sampled,
blurred frames (the pipeline's uniform rule over them is the identity).

* **motion blur**: (L_low, L_high)_s = (5, 9) ... (13, 25); one angle per frame θ = atan2(mean f_y,
  mean f_x + 1e-8) (y down); kernel = L×L zeros with a middle row of ones, rotated (bilinear, zero border) and
  normalised (a box line). ``angle_convention``: ``flow`` (default: rotate by -θ about the kernel centre, so the
  streak follows the flow, App. E.2) or ``legacy`` (the code's +θ about (L/2, L/2): mirrored on diagonals).
* **defocus**: r_low = 3, 4, 6, 8, 10, r_high = 2·r_low; disk 1[X² + Y² <= r²] normalised, then Gaussian-smoothed
  at σ = 0.1 (3×3 for r <= 8, else 5×5) as ImageNet-C; no randomness. ``static_regions``: ``low_kernel`` (code) or
  ``none`` (pixels outside the mask stay sharp, "primarily to moving regions", App. E.2).

Speed (docs/shifts/mlvp.md, "Speed"). Options shared by both shifts: ``flow`` = ``farneback`` (default, Alg. 2) |
``dis`` (OpenCV DIS flow, preset fast: about 9x cheaper, a different flow field); ``flow_scale`` = 1.0 (default:
flow at full resolution, bit-identical to the faithful path) or s < 1: flow on the grey frames resized by s
(INTER_AREA), the high-motion mask taken at that size and upsampled nearest, the mean-flow angle unchanged (it is
scale-free). On the CPU, kernels of 130 taps or more (where filter2D itself switches to a DFT) are correlated
without it where they are sparse (the rotated lines of motion blur: the non-zero taps only, in bands of rows,
:func:`_sparse_correlate`) and through one forward DFT per frame plane shared by both blurs where they are dense
(the defocus disks; about 3x cheaper than two filter2D calls); either way <= 1 grey level from filter2D on rounding
ties, about 1e-5 of values (:func:`correlate_pair`). :func:`blur_blend` fuses that with the masked choice (one
rounding per frame, OpenCV calls; the same pixels); on a CUDA tensor the two blurs are one grouped convolution
(reflect-101 padding, rounded; <= 1 grey level from filter2D). Farneback itself is then about 80 % of the faithful
motion blur's time on the CPU.

The clip's motion (masks and mean flows) depends on its clean frames and the flow settings only, so a run keeps it
in the :class:`~tta.shifts.kernels.motion_store.MotionStore` of its resources (``shift.motion_store``, on by
default): every later severity, seed, adapter and the other flow blur read it instead of computing the flow, with
the same output bits. Once the store links a frame-cache clip to its motion, the stream hands the shift that
clip's uniform frames instead of the whole decoded video (``ShiftContext.sampled``; :class:`WholeVideoNeeded` when
the link is missing), so a warm run decodes no video.

The registered torch twins (:func:`motion_blur_batch`, :func:`video_defocus_batch`, used by ``backend=auto`` on
CUDA) compute the faithful flow for all frame pairs of a batch on the frames' device
(:mod:`tta.shifts.kernels.farneback`) and take the masks there; they give the reference's masks, so their output
differs from it by the blurs' rounding ties only (docs/shifts/mlvp.md, "Speed").
"""

from __future__ import annotations

import math

import cv2
import numpy as np
import torch

from tta.media.frames import uniform_frame_indices
from tta.shifts.kernels.motion_store import ClipMotion, MotionStore, flow_frames
from tta.shifts.registry import register_batched, register_check, register_video_shift
from tta.shifts.video.common import ShiftContext, WholeVideoNeeded

MOTION_LENGTHS = ((5, 9), (7, 13), (9, 17), (11, 21), (13, 25))  # (L_low, L_high), docs/shifts/mlvp.md, App. E.2
DEFOCUS_RADII = (3, 4, 6, 8, 10)  # r_low; r_high = 2 r_low, docs/shifts/mlvp.md, App. E.2
FARNEBACK = dict(pyr_scale=0.5, levels=3, winsize=15, iterations=3, poly_n=5, poly_sigma=1.2, flags=0)
HIGH_MOTION_PERCENTILE = 75.0
FLOW_METHODS = ("farneback", "dis")


def check_flow_options(method: str, scale: float) -> None:
    """One-line errors for ``shift.options.flow`` / ``flow_scale``."""
    if method not in FLOW_METHODS:
        raise ValueError(f"shift.options.flow must be one of {list(FLOW_METHODS)}, got {method!r}")
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 < scale <= 1:
        raise ValueError(f"shift.options.flow_scale must be in (0, 1], got {scale!r}")


@register_check("motion_blur", "video_defocus")
def _check_options(options: dict) -> None:
    check_flow_options(options.get("flow", "farneback"), options.get("flow_scale", 1.0))


def _flow_fn(method: str):
    if method == "farneback":
        return lambda a, b: cv2.calcOpticalFlowFarneback(a, b, None, **FARNEBACK)
    if method == "dis":
        dis = cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_FAST)
        return lambda a, b: dis.calc(a, b, None)
    raise ValueError(f"shift.options.flow must be one of {list(FLOW_METHODS)}, got {method!r}")


def sampled_flows(frames: np.ndarray, indices: list[int], method: str = "farneback", scale: float = 1.0):
    """Yield (index, flow (h, w, 2) float32) for each sampled index (zero flow at index 0), grey frames cached.

    ``scale`` < 1 computes the flow on grey frames resized by ``scale`` (INTER_AREA), so (h, w) is that size.
    """
    check_flow_options(method, scale)
    flow = _flow_fn(method)
    h, w = frames.shape[1:3]
    size = (max(8, round(w * scale)), max(8, round(h * scale))) if scale < 1 else (w, h)
    grey: dict[int, np.ndarray] = {}

    def g(i: int) -> np.ndarray:
        if i not in grey:
            grey[i] = cv2.cvtColor(frames[i], cv2.COLOR_RGB2GRAY)
            if size != (w, h):
                grey[i] = cv2.resize(grey[i], size, interpolation=cv2.INTER_AREA)
        return grey[i]

    for t in indices:
        yield t, (np.zeros((size[1], size[0], 2), np.float32) if t == 0 else flow(g(t - 1), g(t)))


def percentile_linear(values: np.ndarray, q: float) -> float:
    """``np.percentile(values, q)`` (method linear) to the bit, from one partition and a minimum.

    NumPy partitions around both neighbours of the virtual index (n - 1)·q/100 and the two ends; one kth and the
    minimum of the part above it give the same two order statistics at about a fifth of the cost. The
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


def high_motion_mask(flow: np.ndarray, size: tuple[int, int] | None = None) -> np.ndarray:
    """Boolean (H, W): flow magnitude >= its 75th percentile (about the top 25 % of pixels).

    ``size`` = (H, W) upsamples a mask taken on a downscaled flow to the frame (nearest neighbour).
    """
    mag = flow[..., 0].astype(np.float64)  # sqrt(fx² + fy²) in float64, in place: the same numbers, fewer passes
    np.multiply(mag, mag, out=mag)
    fy = flow[..., 1].astype(np.float64)
    np.multiply(fy, fy, out=fy)
    np.add(mag, fy, out=mag)
    np.sqrt(mag, out=mag)
    mask = mag >= percentile_linear(mag, HIGH_MOTION_PERCENTILE)
    if size is not None and mask.shape != tuple(size):
        mask = cv2.resize(mask.view(np.uint8), (size[1], size[0]), interpolation=cv2.INTER_NEAREST).astype(bool)
    return mask


def line_kernel(length: int, angle: float, convention: str = "flow") -> np.ndarray:
    """Normalised L×L box-line kernel rotated by ``angle`` degrees (see the module docstring for conventions)."""
    k = np.zeros((length, length), np.float32)
    k[length // 2, :] = 1.0
    if convention == "flow":
        rot = cv2.getRotationMatrix2D(((length - 1) / 2.0, (length - 1) / 2.0), -angle, 1.0)
    elif convention == "legacy":
        rot = cv2.getRotationMatrix2D((length / 2.0, length / 2.0), angle, 1.0)
    else:
        raise ValueError(f"motion_blur angle_convention must be flow or legacy, got {convention!r}")
    k = cv2.warpAffine(k, rot, (length, length), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT)
    total = k.sum()
    if total <= 0:
        raise ValueError(f"rotated motion kernel of length {length} at {angle}° is empty")
    return k / total


def disk_kernel(radius: int, alias_sigma: float = 0.1) -> np.ndarray:
    """ImageNet-C's defocus disk: 1[X² + Y² <= r²] on [-r, r]², normalised, Gaussian-smoothed at σ = 0.1."""
    ax = np.arange(-radius, radius + 1)
    xx, yy = np.meshgrid(ax, ax)
    disk = ((xx ** 2 + yy ** 2) <= radius ** 2).astype(np.float32)
    disk /= disk.sum()
    ksize = (3, 3) if radius <= 8 else (5, 5)
    return cv2.GaussianBlur(disk, ksize=ksize, sigmaX=alias_sigma)


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
    top-left, over the window of the padded frame it reaches) and the bands summed in float32. About 10x cheaper
    than a DFT blur for the motion kernels; the float sums differ from filter2D's DFT by rounding only.
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


def _correlate_torch(frames: torch.Tensor, kernels: list[np.ndarray]) -> torch.Tensor:
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


def flow_setting(method: str, scale: float, device: torch.device | None = None) -> str:
    """The flow settings a clip's motion depends on, for :class:`MotionStore` keys: OpenCV's (``device`` None) or
    the torch twin's on ``device``. The implementation is named down to what can move a last bit, and so a mask
    tie: OpenCV's version and the SIMD code it dispatches to on this CPU, torch's version and the device model."""
    params = FARNEBACK if method == "farneback" else "preset_fast"
    if device is None:
        impl = f"opencv-{cv2.__version__}-{cv2.getCPUFeaturesLine()}"
    else:
        impl = f"torch-{torch.__version__}-" + (torch.cuda.get_device_name(device) if device.type == "cuda"
                                                else device.type)
    return f"{method}|{float(scale)!r}|{params}|p{HIGH_MOTION_PERCENTILE}|{impl}"


def motion_store(context: ShiftContext | None) -> MotionStore | None:
    """The run's :class:`MotionStore` (``resources["motion_store"]``, built by tta.data.shift_resources), if any."""
    return None if context is None else context.resources.get("motion_store")


def mean_flow(flow: np.ndarray) -> tuple[float, float]:
    """(mean f_x, mean f_y) of a float32 (h, w, 2) flow, NumPy's float32 means (motion blur's angle)."""
    return float(flow[..., 0].mean()), float(flow[..., 1].mean())


def clip_motion(frames: np.ndarray, indices: list[int], method: str = "farneback", scale: float = 1.0,
                store: MotionStore | None = None, context: ShiftContext | None = None) -> ClipMotion:
    """The high-motion masks (at the frames' size) and mean flows of uint8 (T, H, W, 3) ``frames`` at the sampled
    ``indices``, read from ``store`` when it holds them (the same values; the flows are computed otherwise). With a
    store, the frame cache's clip named in ``context`` is linked to the entry when its frames are the sampled ones."""
    size = frames.shape[1:3]
    setting = flow_setting(method, scale)
    key = store.key(frames, indices, size, setting) if store is not None else None
    motion = store.load(key, len(indices), size) if key is not None else None
    if motion is None:
        masks, means = [], []
        for _, f in sampled_flows(frames, indices, method, float(scale)):
            masks.append(high_motion_mask(f, size))
            means.append(mean_flow(f))
        motion = ClipMotion(np.stack(masks), np.array(means, np.float64))
        if key is not None:
            store.save(key, motion)
    if key is not None:
        _link(store, context, setting, key, frames[indices])
    return motion


def _link(store: MotionStore, context: ShiftContext | None, setting: str, key: str, sampled) -> None:
    """Link the frame cache's clip of ``context`` to entry ``key`` if its frames are ``sampled``, bit for bit (the
    whole video's uniform frames over the decoded count, which can differ from the container's count)."""
    if context is None or context.clip_key is None or context.clip is None:
        return
    sampled = torch.as_tensor(sampled).cpu()
    if context.clip.shape == sampled.shape and torch.equal(context.clip.cpu(), sampled):
        store.link(context.clip_key, sampled.shape[0], setting, key)


def _sampled_motion(context: ShiftContext, setting: str, shape: tuple[int, ...]) -> ClipMotion:
    """The stored motion of the uniform frames handed over in ``context.clip`` ((n, H, W, 3) ``shape``), or
    :class:`WholeVideoNeeded` when no link names it."""
    store = motion_store(context)
    n, h, w = shape[:3]
    motion = None
    if store is not None and context.clip_key is not None:
        motion = store.linked(context.clip_key, n, (h, w), setting)
    if motion is None:
        raise WholeVideoNeeded(f"no stored motion for {context.video_id or 'the clip'} under {setting}")
    return motion


def _drive(frames: torch.Tensor, context: ShiftContext | None, kernels, flow: str, flow_scale: float) -> torch.Tensor:
    """The shared driver of Alg. 2: one flow per sampled frame, hard mask, both blurs and one vectorised blend.

    ``kernels((mean f_x, mean f_y)) -> (low kernel or None for "keep the frame", high kernel)``.
    """
    check_flow_options(flow, float(flow_scale))
    arr = np.ascontiguousarray(frames.cpu().numpy())
    if context is not None and context.sampled:  # the frame cache's uniform frames, their motion linked in the store
        indices = list(range(arr.shape[0]))
        motion = _sampled_motion(context, flow_setting(flow, float(flow_scale)), arr.shape)
    else:
        indices = uniform_frame_indices(arr.shape[0], context.num_frames if context is not None else 12)
        motion = clip_motion(arr, indices, flow, float(flow_scale), motion_store(context), context)
    lows, highs = zip(*(kernels(m) for m in motion.means), strict=True)
    lows, highs = list(lows), list(highs)
    if frames.is_cuda:
        return _blend_torch(frames[indices], highs, lows, torch.from_numpy(motion.masks).to(frames.device))
    out = blur_blend(arr[indices], highs, None if lows[0] is None else lows, motion.masks)
    return torch.from_numpy(out).to(frames.device)


def _blend_torch(sampled: torch.Tensor, highs: list[np.ndarray], lows: list, masks: torch.Tensor) -> torch.Tensor:
    """``masks ? high blur : low blur`` (or the frame where the low kernels are None) of uint8 (n, H, W, 3) frames,
    the blurs grouped convolutions on the frames' device."""
    high = _correlate_torch(sampled, highs)
    low = sampled if lows[0] is None else _correlate_torch(sampled, lows)
    return torch.where(masks[..., None], high, low)


def motion_kernels(severity: int, angle_convention: str = "flow"):
    """Motion blur's ``kernels((mean f_x, mean f_y)) -> (low line, high line)`` at ``severity`` (App. E.2)."""
    l_low, l_high = MOTION_LENGTHS[severity - 1]

    def kernels(mean):
        angle = math.degrees(math.atan2(mean[1], mean[0] + 1e-8))
        return line_kernel(l_low, angle, angle_convention), line_kernel(l_high, angle, angle_convention)

    return kernels


def defocus_kernels(severity: int, static_regions: str = "low_kernel"):
    """Video defocus's ``kernels(_) -> (low disk or None, high disk)`` at ``severity`` (App. E.2)."""
    if static_regions not in ("low_kernel", "none"):
        raise ValueError(f"video_defocus static_regions must be low_kernel or none, got {static_regions!r}")
    r = DEFOCUS_RADII[severity - 1]
    k_low, k_high = disk_kernel(r), disk_kernel(2 * r)
    low = k_low if static_regions == "low_kernel" else None
    return lambda _mean: (low, k_high)


@register_video_shift("motion_blur", level="mid", group="B", accepts_sampled=True)
def motion_blur(frames: torch.Tensor, severity: int, generator: torch.Generator, context: ShiftContext | None = None,
                angle_convention: str = "flow", flow: str = "farneback", flow_scale: float = 1.0) -> torch.Tensor:
    """frames: every decoded frame uint8 (T, H, W, 3) -> the ``num_frames`` sampled, blurred frames (docs/shifts/mlvp.md, App. E.2)."""
    return _drive(frames, context, motion_kernels(severity, angle_convention), flow, flow_scale)


@register_video_shift("video_defocus", level="mid", group="B", accepts_sampled=True)
def video_defocus(frames: torch.Tensor, severity: int, generator: torch.Generator, context: ShiftContext | None = None,
                  static_regions: str = "low_kernel", flow: str = "farneback", flow_scale: float = 1.0) -> torch.Tensor:
    """frames: every decoded frame uint8 (T, H, W, 3) -> the ``num_frames`` sampled, defocused frames (docs/shifts/mlvp.md, App. E.2)."""
    return _drive(frames, context, defocus_kernels(severity, static_regions), flow, flow_scale)


def rgb_to_grey(frames: torch.Tensor) -> torch.Tensor:
    """uint8 (..., 3) RGB -> uint8 (...) grey, OpenCV's ``COLOR_RGB2GRAY`` to the bit (its 15-bit fixed point)."""
    x = frames.to(torch.int32)
    return ((x[..., 0] * 9798 + x[..., 1] * 19235 + x[..., 2] * 3735 + 16384) >> 15).to(torch.uint8)


def _masks_from_flows(flows: torch.Tensor) -> torch.Tensor:
    """float32 (n, H, W, 2) flows -> boolean (n, H, W) masks: :func:`high_motion_mask` on the flows' device.

    The magnitudes are the same float64 numbers as NumPy's, and the threshold takes the same two order statistics
    and interpolation as :func:`percentile_linear`, so the masks are the CPU's for the same flows.
    """
    mag = torch.sqrt(flows[..., 0].double() ** 2 + flows[..., 1].double() ** 2)
    flat = mag.reshape(mag.shape[0], -1)
    index = (flat.shape[1] - 1) * (HIGH_MOTION_PERCENTILE / 100)
    lo = math.floor(index)
    ordered = torch.sort(flat, dim=1).values
    pairs = ordered[:, lo:lo + 2].cpu().tolist()
    t = index - lo
    thresholds = [b - (b - a) * (1 - t) if t >= 0.5 else a + (b - a) * t for a, b in pairs]
    return mag >= torch.tensor(thresholds, dtype=torch.float64, device=mag.device)[:, None, None]


def _drive_batch(frames: torch.Tensor, context: ShiftContext | None, kernels, flow: str, flow_scale: float,
                 angles: bool) -> torch.Tensor:
    """The twin of :func:`_drive` for uint8 (N, T, H, W, 3) clips on their device.

    With the faithful flow (``farneback`` at full resolution) the flows of all clips missing from the run's
    :class:`MotionStore` are one batch of :func:`tta.shifts.kernels.farneback.farneback` on the frames' device and the
    masks are taken there; the other flow options compute their flows with OpenCV on the CPU as the reference does.
    The blurs are grouped convolutions. ``kernels((mean f_x, mean f_y) or None) -> (low kernel or None, high
    kernel)``; with ``angles`` (or a store) the flows go to the CPU so that the means are the reference's NumPy
    float32 means.
    """
    check_flow_options(flow, float(flow_scale))
    n_clips, total, h, w, _ = frames.shape
    store = motion_store(context)
    faithful = flow == "farneback" and float(flow_scale) == 1.0
    if context is not None and context.sampled:  # one clip: the frame cache's uniform frames, their motion linked
        if n_clips != 1:
            raise ValueError(f"a call with the uniform frames alone takes one clip, got {n_clips}")
        indices = list(range(total))
        setting = flow_setting(flow, float(flow_scale), frames.device if faithful else None)
        m = _sampled_motion(context, setting, frames.shape[1:])
        motions = [(torch.from_numpy(m.masks).to(frames.device), m.means)]
    else:
        indices = uniform_frame_indices(total, context.num_frames if context is not None else 12)
        single = context if n_clips == 1 else None  # the context names one clip
        if faithful:
            motions = _twin_motion(frames, indices, store, angles, single)
        else:
            motions = []
            for clip in frames:
                m = clip_motion(np.ascontiguousarray(clip.cpu().numpy()), indices, flow, float(flow_scale), store,
                                single)
                motions.append((torch.from_numpy(m.masks).to(frames.device), m.means))
    outs = []
    for clip, (masks, means) in zip(frames, motions, strict=True):
        lows, highs = zip(*(kernels(m) for m in (means if means is not None else [None] * len(indices))), strict=True)
        outs.append(_blend_torch(clip[indices], list(highs), list(lows), masks))
    return torch.stack(outs)


def _twin_motion(frames: torch.Tensor, indices: list[int], store: MotionStore | None, angles: bool,
                 context: ShiftContext | None = None) -> list[tuple[torch.Tensor, np.ndarray | None]]:
    """[(bool (n, H, W) masks on the frames' device, float64 (n, 2) means or None)] per clip: the torch
    Farnebäck for the clips ``store`` does not hold (its entries are the twin's own, apart from OpenCV's). A
    ``context`` names the single clip's frame-cache entry, linked as :func:`clip_motion` links it."""
    n_clips, _, h, w, _ = frames.shape
    setting = flow_setting("farneback", 1.0, frames.device)
    needed = torch.tensor(flow_frames(indices), dtype=torch.long, device=frames.device)
    keys: list[str | None] = [None] * n_clips
    out: list = [None] * n_clips
    if store is not None:
        for c in range(n_clips):
            rows = frames[c, needed].cpu().numpy()
            keys[c] = store.key(dict(zip(needed.tolist(), rows, strict=True)), indices, (h, w), setting)
            if (hit := store.load(keys[c], len(indices), (h, w))) is not None:
                out[c] = (torch.from_numpy(hit.masks).to(frames.device), hit.means)
    todo = [c for c in range(n_clips) if out[c] is None]
    if todo:
        _twin_flows(frames, indices, todo, keys, out, store, angles)
    if store is not None and n_clips == 1:
        _link(store, context, setting, keys[0], frames[0, indices])
    return out


def _twin_flows(frames: torch.Tensor, indices: list[int], todo: list[int], keys: list, out: list,
                store: MotionStore | None, angles: bool) -> None:
    """Fill ``out[c]`` for the clips ``todo`` with the torch Farnebäck's masks and means, storing them under
    ``keys[c]``."""
    from tta.shifts.kernels.farneback import farneback

    _, _, h, w, _ = frames.shape
    flows = torch.zeros(len(todo), len(indices), h, w, 2, device=frames.device)
    moving = [i for i, t in enumerate(indices) if t > 0]
    if moving:
        src = torch.tensor([indices[i] for i in moving], device=frames.device)
        sub = frames[todo]
        prev, nxt = (rgb_to_grey(sub[:, s]).reshape(-1, h, w) for s in (src - 1, src))  # only these frames
        flows[:, moving] = farneback(prev, nxt, **FARNEBACK).reshape(len(todo), len(moving), h, w, 2)
    masks = _masks_from_flows(flows.reshape(-1, h, w, 2)).reshape(len(todo), len(indices), h, w)
    host = flows.cpu().numpy() if angles or store is not None else None
    for j, c in enumerate(todo):
        means = None if host is None else np.array([mean_flow(f) for f in host[j]], np.float64)
        out[c] = (masks[j], means)
        if keys[c] is not None:
            store.save(keys[c], ClipMotion(masks[j].cpu().numpy(), means))


@register_batched("motion_blur", exact=False, cpu=False)
def motion_blur_batch(frames: torch.Tensor, severity: int, generators: list[torch.Generator],
                      context: ShiftContext | None = None, angle_convention: str = "flow", flow: str = "farneback",
                      flow_scale: float = 1.0) -> torch.Tensor:
    """:func:`motion_blur` for uint8 (N, T, H, W, 3) clips on their device (the faithful flow computed there)."""
    return _drive_batch(frames, context, motion_kernels(severity, angle_convention), flow, flow_scale, angles=True)


@register_batched("video_defocus", exact=False, cpu=False)
def video_defocus_batch(frames: torch.Tensor, severity: int, generators: list[torch.Generator],
                        context: ShiftContext | None = None, static_regions: str = "low_kernel",
                        flow: str = "farneback", flow_scale: float = 1.0) -> torch.Tensor:
    """:func:`video_defocus` for uint8 (N, T, H, W, 3) clips on their device (the faithful flow computed there)."""
    return _drive_batch(frames, context, defocus_kernels(severity, static_regions), flow, flow_scale, angles=False)
