"""The test-time query stream and the gallery (spec/hatvtr.md §4 "Data stream", "Gallery precomputation").

Queries stream in dataset file order, batches of 16, no shuffling, the last partial batch kept. A shift acts on
its own modality: a video shift perturbs the videos and a text shift the captions — on the query side in the
paper's query-shift setting (v2t + video shift, t2v + text shift), on the gallery side otherwise (e.g.
``task=t2v shift=gaussian`` is a gallery shift: captions query noisy videos). Each item's randomness is seeded by
(seed, item id, shift, severity) (:func:`tta.shifts.item_seed`), so results do not depend on batch order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch.utils.data import Dataset

from tta.data.cache import FrameCache
from tta.data.readers.msrvtt import VideoTextPair
from tta.data.transforms import clip_transform
from tta.shifts import item_seed, perturb_text, perturb_video, shift_kind


@dataclass(frozen=True)
class ShiftSpec:
    """A shift as a run sees it: ``name`` (``clean`` = none), ``severity`` and shift-specific options."""

    name: str = "clean"
    severity: int = 0
    seed: int = 42
    options: tuple = ()

    @property
    def kind(self) -> str:
        return shift_kind(self.name)

    def video(self, frames: torch.Tensor, video_id: str) -> torch.Tensor:
        if self.kind != "video":
            return frames
        seed = item_seed(self.seed, video_id, self.name, self.severity)
        return perturb_video(frames, self.name, self.severity, seed, **dict(self.options))

    def text(self, caption: str, caption_id: str) -> str:
        if self.kind != "text":
            return caption
        seed = item_seed(self.seed, caption_id, self.name, self.severity)
        return perturb_text(caption, self.name, self.severity, seed, **dict(self.options))


class VideoItems(Dataset):
    """Normalised clips (T, 3, S, S) of a list of pairs, with the shift applied to the native frames first."""

    def __init__(self, pairs: Sequence[VideoTextPair], frames: FrameCache, image_size: int, shift: ShiftSpec):
        self.pairs, self.frames, self.size, self.shift = pairs, frames, image_size, shift

    def __len__(self) -> int:
        return len(self.pairs)

    def clip(self, i: int) -> torch.Tensor:
        p = self.pairs[i]
        raw = self.shift.video(self.frames.get(p.video_path), p.video_id)
        return clip_transform(raw, self.size)

    def __getitem__(self, i: int) -> dict:
        return {"index": i, "video": self.clip(i)}


class TextItems(Dataset):
    """Captions of a list of pairs, with the text shift applied."""

    def __init__(self, pairs: Sequence[VideoTextPair], shift: ShiftSpec):
        self.pairs, self.shift = pairs, shift

    def __len__(self) -> int:
        return len(self.pairs)

    def text(self, i: int) -> str:
        p = self.pairs[i]
        return self.shift.text(p.caption, p.caption_id or p.video_id)

    def __getitem__(self, i: int) -> dict:
        return {"index": i, "text": self.text(i)}


class Collate:
    """Batches stream items; captions are tokenised here with the model's tokenizer."""

    def __init__(self, tokenizer=None):
        self.tokenizer = tokenizer

    def __call__(self, items: list[dict]) -> dict:
        out = {"index": torch.tensor([it["index"] for it in items], dtype=torch.long)}
        if "video" in items[0]:
            out["video"] = torch.stack([it["video"] for it in items])
        if "text" in items[0]:
            out["text"] = [it["text"] for it in items]
            out["tokens"] = self.tokenizer(out["text"])
        return out
