"""Batched no-grad encoding of whole splits (galleries, evaluation) and clean-split evaluation."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from tta.models.retrieval import RetrievalModel
from tta.utils.forking import fork_safe


@torch.no_grad()
def encode_texts(model: RetrievalModel, captions: Sequence[str], batch_size: int = 256,
                 device: torch.device | str = "cpu") -> torch.Tensor:
    """(N, D) caption embeddings."""
    out = []
    for i in range(0, len(captions), batch_size):
        tokens = model.tokenize(list(captions[i:i + batch_size])).to(device)
        out.append(model.encode_text(tokens).float())
    return torch.cat(out)


@torch.no_grad()
def encode_videos(model: RetrievalModel, load: Callable[[int], torch.Tensor], n: int, batch_size: int = 32,
                  device: torch.device | str = "cpu", workers: int = 0) -> torch.Tensor:
    """(N, T, D) per-frame embeddings; ``load(i)`` returns the normalised clip (T, 3, H, W) of item i.

    ``workers`` > 0 loads (decodes, perturbs) the clips in that many processes, in order (``load`` must pickle).
    """
    if workers > 0 and n > batch_size:
        from torch.utils.data import DataLoader

        batches = DataLoader(range(n), batch_size=batch_size, num_workers=workers, collate_fn=_Stack(load))
        with fork_safe():
            return torch.cat([model.encode_video(clips.to(device)).float() for clips in batches])
    batches = (_Stack(load)(range(i, min(n, i + batch_size))) for i in range(0, n, batch_size))
    return torch.cat([model.encode_video(clips.to(device)).float() for clips in batches])


class _Stack:
    """A picklable collate: the stacked clips of a list of item indices."""

    def __init__(self, load: Callable[[int], torch.Tensor]):
        self.load = load

    def __call__(self, indices) -> torch.Tensor:
        return torch.stack([self.load(j) for j in indices])


@torch.no_grad()
def pairwise_similarity(model: RetrievalModel, text: torch.Tensor, video: torch.Tensor, chunk: int = 256) -> torch.Tensor:
    """(Nt, Nv) text-to-video similarity, chunked over captions (X-Pool pools Nv x chunk vectors at a time)."""
    return torch.cat([model.text_video_similarity(text[i:i + chunk], video) for i in range(0, len(text), chunk)])
