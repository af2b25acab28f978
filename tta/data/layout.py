"""Which pairs are queries, which are gallery items, and what is relevant to each query.

The HAT-VTR protocol is 1:1 (docs/methods/metrics.md): one caption per video, query i's relevant item is gallery
item i. A multi-caption split (``data.all_captions=true`` or ``inputs.duplicates=multi``: MSVD's ~40 captions per
video, MSR-VTT's 20 from ``MSRVTT_data.json``) is evaluated as follows:

- **t2v**: every caption is a query; the gallery holds each video once (first-appearance order); a caption's one
  relevant item is its video.
- **v2t**: each video is a query (once); the gallery holds every caption; a video is ranked by its best-ranked
  caption (:func:`tta.metrics.gt_ranks_multi`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from tta.data.readers.msrvtt import VideoTextPair


@dataclass
class EvalLayout:
    """Queries and gallery of one run.

    Attributes:
        queries: the pairs whose query side streams through the adapter (videos for v2t, captions for t2v).
        gallery: the pairs whose gallery side is encoded once.
        gt: (Q,) relevance class of each query; in 1:1 and multi-caption t2v it is the gallery index.
        gallery_class: (G,) relevance class of each gallery item (multi-caption v2t: the video of each caption);
            None when gallery item j's class is j.
        query_rows: index in the screened pairs of each query (its first caption for a v2t video query).
        multi: True for a multi-caption layout.
    """

    queries: list[VideoTextPair]
    gallery: list[VideoTextPair]
    gt: torch.Tensor
    gallery_class: torch.Tensor | None
    query_rows: list[int]
    multi: bool = False

    @classmethod
    def build(cls, pairs: Sequence[VideoTextPair], task: str, multi: bool = False) -> EvalLayout:
        """The 1:1 layout, or the multi-caption one (docs/methods/metrics.md) when ``multi``."""
        pairs = list(pairs)
        if not multi:
            return cls(pairs, pairs, torch.arange(len(pairs)), None, list(range(len(pairs))))
        first: dict[str, int] = {}
        for i, p in enumerate(pairs):
            first.setdefault(p.video_id, i)
        video_rows = list(first.values())
        order = {vid: k for k, vid in enumerate(first)}
        video_of = torch.tensor([order[p.video_id] for p in pairs], dtype=torch.long)
        videos = [pairs[i] for i in video_rows]
        if task == "t2v":
            return cls(pairs, videos, video_of, None, list(range(len(pairs))), multi=True)
        if task == "v2t":
            return cls(videos, pairs, torch.arange(len(videos)), video_of, video_rows, multi=True)
        raise ValueError(f"task must be v2t or t2v, got {task!r}")

    @property
    def num_videos(self) -> int:
        """Distinct videos of the run (the gallery holds every video, once or through its captions)."""
        return len({p.video_id for p in self.gallery})

    def relevant_mask(self, rows: torch.Tensor | None = None) -> torch.Tensor | None:
        """(Q', G) bool relevance of the given query rows (all by default); None for a one-relevant layout."""
        if self.gallery_class is None:
            return None
        gt = self.gt if rows is None else self.gt[rows]
        return gt[:, None] == self.gallery_class[None, :]

