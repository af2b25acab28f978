"""Distribution shifts: MLVP video perturbations and text perturbations, seeded per (seed, item, shift, severity).

Public interface::

    perturb_video(frames, name, severity, seed) -> uint8 frames     video_shift_names() -> list[str]
    perturb_text(text, name, severity, seed) -> str                  text_shift_names() -> list[str]

``seed`` is the item's own seed; :func:`item_seed` derives it from (base seed, item id, shift, severity) as
docs/shifts/mlvp.md ("Seeding") prescribes, so any single video or caption regenerates bit for bit, whatever the order of a run.
``perturb_video`` takes a clip (T, H, W, 3) or a batch (N, T, H, W, 3) with one seed per clip.

What a run actually executed (faithful or approximate, resolved options, donor query source, the share of
captions a text shift changed) is :func:`tta.shifts.registry.implementation_record`; the results writer stores it
under ``shift_implementation``.

Video options read here, for every video shift: ``apply_at`` — ``native`` (default, MLVP's code: the shift acts on
the native-resolution frames before the CLIP resize) or ``canonical`` (the frames are first resized (short side,
bicubic, antialiased) and centre-cropped to ``canonical_size`` = 224 and rounded to uint8, then shifted; the CLIP
transform that follows is then the identity up to normalisation; spec: ``mlvp.apply_at``, not equivalent because
ImageNet-C's pixel constants act on a different scale). Main-object boxes are mapped to the canonical frame.
"""

from __future__ import annotations

import inspect
import random

import torch

from tta.shifts import text as _text  # noqa: F401  (registers text shifts)
from tta.shifts import video as _video  # noqa: F401  (registers video shifts)
from tta.shifts.registry import check_severity, get_shift, item_seed, option_bounds, text_names, video_names
from tta.shifts.video.mixed import is_mixed

__all__ = ["perturb_video", "perturb_text", "video_shift_names", "text_shift_names", "item_seed", "shift_kind",
           "implementation_record", "option_bounds", "APPLY_AT", "SHIFT_DEVICES", "BACKENDS", "resolve_shift_device"]

APPLY_AT = ("native", "canonical")
#: ``shift.device``: ``cpu`` (shifts run on the CPU, in the loader workers when there are any), ``model`` (on the
#: device the model runs on: CUDA when the trainer's accelerator is gpu, or auto with a GPU present; the loader then
#: runs in the main process) or ``auto`` (= model when the loader has no workers, else cpu)
SHIFT_DEVICES = ("auto", "cpu", "model")


def resolve_shift_device(setting: str = "auto", accelerator: str = "auto", workers: int = 0) -> torch.device:
    """The device video shifts run on for ``shift.device`` = ``setting``, ``trainer.accelerator`` and the
    number of loader workers the run would use."""
    if setting not in SHIFT_DEVICES:
        raise ValueError(f"shift.device must be one of {list(SHIFT_DEVICES)}, got {setting!r}")
    gpu = accelerator in ("auto", "gpu", "cuda") and torch.cuda.is_available()
    use_model = setting == "model" or (setting == "auto" and workers == 0)
    return torch.device("cuda" if use_model and gpu else "cpu")


def video_shift_names() -> list[str]:
    return video_names()


def text_shift_names() -> list[str]:
    return text_names()


def shift_kind(name: str) -> str:
    """``clean``, ``video`` or ``text`` (mixed MLVP streams are ``video``)."""
    if name == "clean":
        return "clean"
    return "video" if is_mixed(name) else get_shift(name).kind


BACKENDS = ("auto", "reference", "torch")


def perturb_video(frames: torch.Tensor, name: str, severity: int, seed, backend: str = "auto",
                  **options) -> torch.Tensor:
    """Apply a video shift to a decoded clip or a batch of clips, on the frames' device.

    Args:
        frames: uint8 (T, H, W, 3) native-resolution frames, or a batch (N, T, H, W, 3) of equally sized clips.
        name: a name from :func:`video_shift_names`.
        severity: 1..5.
        seed: the item seed (see :func:`item_seed`); for a batch, one seed per clip.
        backend: ``reference`` (the shift's reference implementation, clip by clip), ``torch`` (its vectorised
            torch twin; an error if it has none) or ``auto`` (the twin on CUDA, or on the CPU when it is exact
            and not slower there, else the reference).

    Returns:
        uint8 (T', H, W, 3), or (N, T', H, W, 3) for a batch; T' = T except for shifts that change time.

    ``options`` are the shift's keyword options; ``context`` (a :class:`tta.shifts.video.ShiftContext`) is passed
    only to shifts that take one (occlusion boxes, donor pool, frame rate) and dropped for the others.
    """
    info = get_shift(name)
    if info.kind != "video":
        raise ValueError(f"{name!r} is a {info.kind} shift; use perturb_text")
    if frames.dtype != torch.uint8 or frames.dim() not in (4, 5) or frames.shape[-1] != 3:
        raise ValueError(f"perturb_video expects uint8 (T, H, W, 3) frames or an (N, T, H, W, 3) batch, got "
                         f"{frames.dtype} {tuple(frames.shape)}")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {list(BACKENDS)}, got {backend!r}")
    batch = frames.dim() == 5
    seeds = [int(s) for s in seed] if batch else [int(seed)]
    if batch and len(seeds) != frames.shape[0]:
        raise ValueError(f"a batch of {frames.shape[0]} clips needs as many seeds, got {len(seeds)}")
    severity = check_severity(info, severity)
    apply_at = options.pop("apply_at", "native")
    size = int(options.pop("canonical_size", 224))
    if apply_at not in APPLY_AT:
        raise ValueError(f"shift.options.apply_at must be native or canonical, got {apply_at!r}")
    if backend == "torch" and info.batched is None:
        raise ValueError(f"shift {name!r} has no vectorised torch implementation; use backend=reference")
    twin = info.batched is not None and (backend == "torch" or (backend == "auto" and (
        frames.is_cuda or (info.batched_exact and info.batched_cpu))))
    clips = frames if batch else frames[None]
    if apply_at == "canonical":
        canon = [_canonical(c, options, size) for c in clips]
        clips, options = torch.stack([c for c, _ in canon]), canon[0][1]
    gens = [torch.Generator().manual_seed(s) for s in seeds]
    if twin:
        if "context" in options and "context" not in inspect.signature(info.batched).parameters:
            options.pop("context")
        if clips.is_cuda:
            out = info.batched(clips, severity, gens, **options)
        else:  # memory-bound on the CPU: one clip at a time stays in cache (docs/results/shift-speed.md)
            outs = [info.batched(clips[i:i + 1], severity, [g], **options) for i, g in enumerate(gens)]
            out = outs[0] if len(outs) == 1 else torch.cat(outs)
    else:
        if "context" in options and "context" not in inspect.signature(info.fn).parameters:
            options.pop("context")
        out = torch.stack([info.fn(c, severity, g, **options) for c, g in zip(clips, gens, strict=True)])
    return out if batch else out[0]


def _canonical(frames: torch.Tensor, options: dict, size: int) -> tuple[torch.Tensor, dict]:
    """Frames resized and centre-cropped as the CLIP test transform does, as uint8; boxes mapped alike."""
    import dataclasses

    from tta.media.transforms import center_crop, resize_short_side

    _, h, w, _ = frames.shape
    x = resize_short_side(frames.permute(0, 3, 1, 2).float() / 255.0, size)
    rh, rw = x.shape[-2:]
    x = center_crop(x, size)
    out = (255.0 * x.clamp(0, 1)).round().to(torch.uint8).permute(0, 2, 3, 1).contiguous()
    ctx = options.get("context")
    if ctx is not None and getattr(ctx, "main_objects", None):
        top, left = int(round((rh - size) / 2.0)), int(round((rw - size) / 2.0))
        sy, sx = rh / h, rw / w

        def move(e: dict) -> dict:
            x1, y1, x2, y2 = e["box"]
            return {**e, "box": [x1 * sx - left, y1 * sy - top, x2 * sx - left, y2 * sy - top]}

        entry = dict(ctx.main_objects)
        ranked = entry.get("ranked_objects_per_frame") or {}
        entry["ranked_objects_per_frame"] = {k: [move(e) for e in v] for k, v in ranked.items()}
        options = {**options, "context": dataclasses.replace(ctx, main_objects=entry)}
    return out, options


def implementation_record(spec, captions=None) -> dict:
    """What a shift run actually executes; see :func:`tta.shifts.registry.implementation_record`."""
    from tta.shifts.registry import implementation_record as record

    return record(spec, captions)


def perturb_text(text: str, name: str, severity: int, seed: int, **options) -> str:
    """Apply a text shift to one caption (seeded by the item seed)."""
    info = get_shift(name)
    if info.kind != "text":
        raise ValueError(f"{name!r} is a {info.kind} shift; use perturb_video")
    return info.fn(text, check_severity(info, severity), random.Random(int(seed)), **options)
