"""High-level shift of MLVP: event insertion (docs/shifts/mlvp.md, App. E.3), a retrieved donor clip replaces the tail.

ρ_s = 0.30, 0.40, 0.50, 0.60, 0.70; with F = 12 frames, k = clamp(round(F·ρ), 1, F-1) = 4, 5, 6, 7, 8 donor
frames. The donor is the pool video (from the **train** split, so never a test video) with the largest raw dot
product between its pooled frame embedding and the query embedding (not a cosine, as the code) — deterministic,
no randomness. The query (``query``): ``caption_text`` (default, code: the text embedding of the video's generated
caption ``video_caption`` of the main-objects JSON) or ``video`` (the clean clip's mean frame embedding, the
paper's description). A video without a generated caption, or whose "generated" caption is one of its ground-truth
captions, takes the video query (``caption_fallback: video``, the only value): a donor chosen with the ground-truth
caption is the pool clip that best matches the very text the video has to retrieve (v2t), so inserting it carried
the answer into the query and raised R@1 above clean (docs/shifts/mlvp.md). Pool videos that carry one of the
query's ground-truth captions are never donors either. The run records how each query
was formed (``donor_query_source``: generated_caption / video_embedding counts; see
:func:`tta.shifts.registry.implementation_record`). The pool (:class:`DonorPool`) is built by the run with the
backbone and cached on disk; it reaches the shift as ``context.resources["donor_pool"]``.

Layout (``position``): ``tail`` (default, code) keeps the first F - k of the 12 uniform frames and appends k frames
sampled uniformly over the whole donor, bilinearly resized to H×W (no antialias, aspect not kept); ``middle``
(paper) keeps the first ⌈(F-k)/2⌉ and the last ⌊(F-k)/2⌋ frames around the donor frames. The clip keeps F frames.
Group A: it starts from the same 12 uniform frames as the clean clip (container frame count; docs/shifts/mlvp.md, frames).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tta.shifts.registry import register_video_shift
from tta.shifts.video.common import ShiftContext, to_uint8
from tta.utils.bounds import Int

EVENT_RATIO = (0.30, 0.40, 0.50, 0.60, 0.70)


def donor_frame_count(f: int, severity: int) -> int:
    """k = clamp(round(F·ρ_s), 1, F-1)."""
    return max(1, min(f - 1, round(f * EVENT_RATIO[severity - 1])))


def splice(frames: torch.Tensor, donor: torch.Tensor, position: str = "tail") -> torch.Tensor:
    """Replace k = len(donor) frames of ``frames`` (uint8 (F, H, W, 3)) by the donor frames resized to H×W."""
    f, h, w, _ = frames.shape
    k = donor.shape[0]
    d = donor.to(frames.device).permute(0, 3, 1, 2).float() / 255.0
    d = F.interpolate(d, size=(h, w), mode="bilinear", align_corners=False, antialias=False)
    d = to_uint8(d.permute(0, 2, 3, 1))
    if position == "tail":
        return torch.cat([frames[: f - k], d])
    if position == "middle":
        head = -(-(f - k) // 2)
        return torch.cat([frames[:head], d, frames[f - (f - k) // 2:]])  # the LAST ⌊(F-k)/2⌋ frames
    raise ValueError(f"event_insertion position must be tail or middle, got {position!r}")


def _donor_record(options: dict, resources: dict) -> dict:
    """Which queries chose the donors (a ground-truth caption makes the run optimistic)."""
    counts = resources.get("donor_query_source")
    return {"donor_query_source": dict(counts) if counts is not None else None,
            "donor_query_optimistic": bool(counts and counts.get("ground_truth_caption"))}


@register_video_shift("event_insertion", level="high", record=_donor_record, bounds={"pool_size": Int(1)})
def event_insertion(frames: torch.Tensor, severity: int, generator: torch.Generator, context: ShiftContext | None = None,
                    position: str = "tail", query: str = "caption_text", pool_size: int = 2000,
                    caption_fallback: str = "video") -> torch.Tensor:
    """frames: uint8 (F, H, W, 3) -> uint8 (F, H, W, 3) whose last k frames come from the donor (docs/shifts/mlvp.md, App. E.3).

    ``pool_size`` and ``caption_fallback`` are read by the run when it builds the pool (the code README's 2 k train
    videos; the query of a video without a generated caption).
    """
    pool = context.resources.get("donor_pool") if context is not None else None
    if pool is None:
        raise ValueError("event_insertion needs a donor pool: tta.run / tta.perturb build one from the train split "
                         "with the backbone; when calling perturb_video directly pass context=ShiftContext(video_id, "
                         "resources={'donor_pool': DonorPool(...)}) (tta.shifts.video.donors)")
    k = donor_frame_count(frames.shape[0], severity)
    return splice(frames, pool.donor_frames(context.video_id, k, query), position)
