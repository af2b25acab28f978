"""Mid-level, motion-driven blurs of MLVP: motion blur and video defocus (docs/shifts/mlvp.md, App. E.2).

Group B, one shared driver (Alg. 2): for each uniformly sampled index t of the decoded video, Farneback dense flow
from grey frame t-1 to grey frame t (zero at t = 0); pixels whose flow magnitude reaches the frame's 75th percentile
form a hard mask M, and the output is ``M ? blur_high(frame) : blur_low(frame)`` (2-D correlation, reflect-101,
rounded). Motion blur's kernels are box lines along the mean flow's angle, video defocus's ImageNet-C disks.
Options (``flow``, ``flow_scale``, ``angle_convention``, ``static_regions``) and their effect are in
docs/shifts/mlvp.md. The faster arithmetic (:mod:`tta.shifts.kernels.blur`), the torch twins
(:mod:`tta.shifts.kernels.flow_blur_batch`) and the motion store (:mod:`tta.shifts.kernels.motion_store`: a clip's
masks and mean flows depend on its clean frames only, so later severities, seeds and adapters reuse them) give
this module's results and live apart from it.
"""

from __future__ import annotations

import math

import cv2
import numpy as np
import torch

from tta.media.frames import uniform_frame_indices
from tta.shifts.kernels.blur import blend_torch, blur_blend, percentile_linear
from tta.shifts.kernels.motion_store import ClipMotion, MotionStore
from tta.shifts.registry import register_check, register_video_shift
from tta.shifts.video.common import ShiftContext, WholeVideoNeeded
from tta.utils.bounds import Real

MOTION_LENGTHS = ((5, 9), (7, 13), (9, 17), (11, 21), (13, 25))  # (L_low, L_high), docs/shifts/mlvp.md, App. E.2
DEFOCUS_RADII = (3, 4, 6, 8, 10)  # r_low; r_high = 2 r_low, docs/shifts/mlvp.md, App. E.2
FARNEBACK = dict(pyr_scale=0.5, levels=3, winsize=15, iterations=3, poly_n=5, poly_sigma=1.2, flags=0)
HIGH_MOTION_PERCENTILE = 75.0
FLOW_METHODS = ("farneback", "dis")
FLOW_BOUNDS = {"flow_scale": Real(0, 1, lo_open=True)}  # flow and mask computed at flow_scale x the size


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


def high_motion_mask(flow: np.ndarray, size: tuple[int, int] | None = None) -> np.ndarray:
    """Boolean (H, W): flow magnitude >= its 75th percentile, NumPy's linear interpolation (about the top 25 % of
    pixels; at t = 0 the flow is zero, so the whole frame gets the high kernel).

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
    """Normalised L×L box-line kernel rotated by ``angle`` degrees: ``flow`` rotates by -angle about the kernel's
    centre, so the streak follows the flow (y down); ``legacy`` is the code's +angle about (L/2, L/2), mirrored on
    diagonals (docs/shifts/mlvp.md)."""
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
        link_clip_motion(store, context, setting, key, frames[indices])
    return motion


def link_clip_motion(store: MotionStore, context: ShiftContext | None, setting: str, key: str, sampled) -> None:
    """Link the frame cache's clip of ``context`` to entry ``key`` if its frames are ``sampled``, bit for bit (the
    whole video's uniform frames over the decoded count, which can differ from the container's count)."""
    if context is None or context.clip_key is None or context.clip is None:
        return
    sampled = torch.as_tensor(sampled).cpu()
    if context.clip.shape == sampled.shape and torch.equal(context.clip.cpu(), sampled):
        store.link(context.clip_key, sampled.shape[0], setting, key)


def linked_motion(context: ShiftContext, setting: str, shape: tuple[int, ...]) -> ClipMotion:
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


def drive(frames: torch.Tensor, context: ShiftContext | None, kernels, flow: str, flow_scale: float) -> torch.Tensor:
    """The shared driver of Alg. 2: one flow per sampled frame, hard mask, both blurs and one vectorised blend.

    ``kernels((mean f_x, mean f_y)) -> (low kernel or None for "keep the frame", high kernel)``.
    """
    check_flow_options(flow, float(flow_scale))
    arr = np.ascontiguousarray(frames.cpu().numpy())
    if context is not None and context.sampled:  # the frame cache's uniform frames, their motion linked in the store
        indices = list(range(arr.shape[0]))
        motion = linked_motion(context, flow_setting(flow, float(flow_scale)), arr.shape)
    else:
        indices = uniform_frame_indices(arr.shape[0], context.num_frames if context is not None else 12)
        motion = clip_motion(arr, indices, flow, float(flow_scale), motion_store(context), context)
    lows, highs = zip(*(kernels(m) for m in motion.means), strict=True)
    lows, highs = list(lows), list(highs)
    if frames.is_cuda:
        return blend_torch(frames[indices], highs, lows, torch.from_numpy(motion.masks).to(frames.device))
    # filter2D per blur and the masked copy, computed with fewer passes (<= 1 grey level on rounding ties)
    out = blur_blend(arr[indices], highs, None if lows[0] is None else lows, motion.masks)
    return torch.from_numpy(out).to(frames.device)


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


# the batched torch twins of both shifts (used on CUDA) register themselves in tta.shifts.kernels.flow_blur_batch
@register_video_shift("motion_blur", level="mid", group="B", accepts_sampled=True, bounds=FLOW_BOUNDS)
def motion_blur(frames: torch.Tensor, severity: int, generator: torch.Generator, context: ShiftContext | None = None,
                angle_convention: str = "flow", flow: str = "farneback", flow_scale: float = 1.0) -> torch.Tensor:
    """frames: every decoded frame uint8 (T, H, W, 3) -> the ``num_frames`` sampled, blurred frames (docs/shifts/mlvp.md, App. E.2)."""
    return drive(frames, context, motion_kernels(severity, angle_convention), flow, flow_scale)


@register_video_shift("video_defocus", level="mid", group="B", accepts_sampled=True, bounds=FLOW_BOUNDS)
def video_defocus(frames: torch.Tensor, severity: int, generator: torch.Generator, context: ShiftContext | None = None,
                  static_regions: str = "low_kernel", flow: str = "farneback", flow_scale: float = 1.0) -> torch.Tensor:
    """frames: every decoded frame uint8 (T, H, W, 3) -> the ``num_frames`` sampled, defocused frames (docs/shifts/mlvp.md, App. E.2)."""
    return drive(frames, context, defocus_kernels(severity, static_regions), flow, flow_scale)
