"""Clean source-split data for the few methods that use it before adapting.

The HAT-VTR protocol has no source data (docs/methods/protocol.md); two options bring some in explicitly:
EATA's Fisher anti-forgetting term (``eata.fisher: train_split``: 2000 clean training-split queries, pseudo-labels
= argmax over that split's gallery) and QB-Norm's original query bank (``bank: train_split``). Both see the first
``n`` videos of the training split in file order with their first caption (1:1, like the test split), unshifted,
encoded by the source model before the first update.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import torch
from torch.utils.data import DataLoader

from tta.data.cache import FrameCache
from tta.data.readers.msrvtt import VideoTextPair
from tta.data.stream import Collate, ShiftSpec, TextItems, VideoItems
from tta.models.encode import EncodeSetting, encode_texts, encode_videos, transforms_on
from tta.models.retrieval import RetrievalModel

log = logging.getLogger(__name__)

ALL_PAIRS = 1 << 30  # a request for "the whole split"


def one_caption_per_video(pairs: list[VideoTextPair], n: int) -> list[VideoTextPair]:
    """The first ``n`` videos in file order, each with its first caption."""
    seen: set[str] = set()
    out = []
    for p in pairs:
        if p.video_id in seen:
            continue
        seen.add(p.video_id)
        out.append(p)
        if len(out) == n:
            break
    return out


class SourceSplit:
    """Clean pairs of a source split as query batches and as a gallery, in the run's direction.

    Args:
        model: the retrieval model (encodes the gallery; call :meth:`gallery` before any update).
        pairs: the split's pairs (:func:`one_caption_per_video` is applied).
        n: number of pairs to keep.
        task: ``v2t`` (video queries, caption gallery) or ``t2v``.
        frames: the run's decoded-frame cache.
        transform_device: run.yaml's ``transform_device``: where a video gallery gets the CLIP transform.
    """

    def __init__(self, model: RetrievalModel, pairs: list[VideoTextPair], n: int, task: str, frames: FrameCache,
                 transform_device: str = "auto"):
        self.model, self.task, self.frames, self.transform_device = model, task, frames, transform_device
        self.pairs = one_caption_per_video(pairs, n)
        if not self.pairs:
            raise ValueError("the source split is empty")
        if len(self.pairs) < n < ALL_PAIRS:
            log.warning("source split: %d pairs requested, %d available", n, len(self.pairs))
        self._gallery: torch.Tensor | None = None
        self._warm = False

    def __len__(self) -> int:
        return len(self.pairs)

    def _videos(self) -> VideoItems:
        if not self._warm:
            self.frames.warm([p.video_path for p in self.pairs], "decoding source-split videos")
            self._warm = True
        return VideoItems(self.pairs, self.frames, self.model.image_size, ShiftSpec())

    def batches(self, batch_size: int) -> Iterator[dict]:
        """Clean query batches (the stream's batch format: ``index`` and ``video`` or ``text`` + ``tokens``)."""
        items = self._videos() if self.task == "v2t" else TextItems(self.pairs, ShiftSpec())
        tok = self.model.tokenizer if self.task == "t2v" else None
        yield from DataLoader(items, batch_size=batch_size, shuffle=False, collate_fn=Collate(tok))

    @torch.no_grad()
    def gallery(self) -> torch.Tensor:
        """The split's gallery by the current (source) model: (n, D) captions (v2t) or (n, T, D) frames (t2v)."""
        if self._gallery is None:
            device = str(next(self.model.parameters()).device)  # where the adapter runs
            setting = EncodeSetting(device, transform_on_device=transforms_on(device, self.transform_device))
            if self.task == "v2t":
                self._gallery = encode_texts(self.model, [p.caption for p in self.pairs], setting=setting)
            else:
                items = self._videos()
                self._gallery = encode_videos(self.model, items.loader(setting.transform_on_device), len(self.pairs),
                                              setting=setting)
        return self._gallery
