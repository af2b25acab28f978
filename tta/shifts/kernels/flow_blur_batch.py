"""The torch twins of the flow blurs (``backend=auto`` on CUDA): the faithful Farnebäck flow of every frame pair of
a batch of clips on their device (:mod:`tta.shifts.kernels.farneback`), the masks taken there and the blurs as
grouped convolutions. They give the reference's masks, so their output differs from
:mod:`tta.shifts.video.flow_blur` by the blurs' rounding ties only (tests/shifts/kernels/test_farneback.py)."""

from __future__ import annotations

import numpy as np
import torch

from tta.media.frames import uniform_frame_indices
from tta.shifts.kernels.blur import blend_torch, masks_from_flows, rgb_to_grey
from tta.shifts.kernels.motion_store import ClipMotion, MotionStore, flow_frames
from tta.shifts.registry import register_batched
from tta.shifts.video.common import ShiftContext
from tta.shifts.video.flow_blur import (
    FARNEBACK,
    HIGH_MOTION_PERCENTILE,
    check_flow_options,
    clip_motion,
    defocus_kernels,
    flow_setting,
    link_clip_motion,
    linked_motion,
    mean_flow,
    motion_kernels,
    motion_store,
)


def _drive_batch(frames: torch.Tensor, context: ShiftContext | None, kernels, flow: str, flow_scale: float,
                 angles: bool) -> torch.Tensor:
    """The twin of :func:`tta.shifts.video.flow_blur.drive` for uint8 (N, T, H, W, 3) clips on their device.

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
        m = linked_motion(context, setting, frames.shape[1:])
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
        outs.append(blend_torch(clip[indices], list(highs), list(lows), masks))
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
        link_clip_motion(store, context, setting, keys[0], frames[0, indices])
    return out


def _twin_flows(frames: torch.Tensor, indices: list[int], todo: list[int], keys: list, out: list,
                store: MotionStore | None, angles: bool) -> None:
    """Fill ``out[c]`` for the clips ``todo`` with the torch Farnebäck's masks and means, storing them under
    ``keys[c]``."""
    from tta.shifts.kernels.farneback import farneback  # loaded when a twin first runs, not with every shift

    _, _, h, w, _ = frames.shape
    flows = torch.zeros(len(todo), len(indices), h, w, 2, device=frames.device)
    moving = [i for i, t in enumerate(indices) if t > 0]
    if moving:
        src = torch.tensor([indices[i] for i in moving], device=frames.device)
        sub = frames[todo]
        prev, nxt = (rgb_to_grey(sub[:, s]).reshape(-1, h, w) for s in (src - 1, src))  # only these frames
        flows[:, moving] = farneback(prev, nxt, **FARNEBACK).reshape(len(todo), len(moving), h, w, 2)
    masks = masks_from_flows(flows.reshape(-1, h, w, 2), HIGH_MOTION_PERCENTILE).reshape(len(todo), len(indices), h, w)
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
