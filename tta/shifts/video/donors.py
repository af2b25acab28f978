"""The donor pool of event insertion (docs/shifts/mlvp.md, App. E.3): train-split videos embedded by the backbone.

* **Pool**: up to ``pool_size`` distinct train videos (the code README: 2 k random MSR-VTT train videos), drawn
  by a seeded permutation, so the pool never overlaps the test set; the list is recorded.
* **Pool embeddings**: the uniform frames of each pool video through the CLIP test transform and the backbone's
  image tower, per-frame features **not normalised**, averaged over frames; cached on disk per (model, pool).
* **Queries**: per test video, the text embedding (not normalised) of its generated caption (``video_caption``
  of the main-objects JSON), or with ``query=video`` the clean clip's mean frame embedding. Without a generated
  caption the query is the clip embedding (``caption_fallback=video``, the paper's query). A ground-truth caption
  never forms a query, also not when the dataset stores it as the "generated" one (the embedded benchmark does):
  the donor would then be the pool video that best matches the answer, and inserting it raised v2t R@1 above
  clean. ``query_sources`` records which query each video got.
* **Answer donors excluded**: a pool video that carries one of the test video's ground-truth captions is never its
  donor (nor the video itself).
  Computed once, before any adaptation, so the donor of a video never depends on the
  state of an adapting model.
* **Donor**: argmax of the raw dot product (deterministic).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from tta.media.frames import uniform_frame_indices
from tta.media.video import read_frames, video_frame_count
from tta.utils.io import load_cached, save_cached

log = logging.getLogger(__name__)


class DonorPool:
    """Pool videos with their pooled embeddings and per-test-video query embeddings.

    Args:
        paths: video files of the pool (P of them).
        ids: their video ids.
        embeddings: (P, D) pooled, unnormalised frame embeddings.
        queries: ``{query mode: {test video id: (D,) embedding}}``.
        excluded: ``{test video id: pool positions}`` that may never be its donor (they show its answer).
    """

    def __init__(self, paths: Sequence[str], ids: Sequence[str], embeddings: torch.Tensor,
                 queries: dict[str, dict[str, torch.Tensor]] | None = None, query_sources: dict[str, str] | None = None,
                 excluded: dict[str, Sequence[int]] | None = None):
        if len(paths) != embeddings.shape[0] or len(paths) == 0:
            raise ValueError(f"donor pool: {len(paths)} videos but {embeddings.shape[0]} embeddings")
        self.paths, self.ids, self.embeddings = list(paths), list(ids), embeddings.float()
        self.queries = queries or {}
        #: {test video id: generated_caption | video_embedding}
        self.query_sources = dict(query_sources or {})
        self.excluded = {v: list(i) for v, i in (excluded or {}).items()}

    def __len__(self) -> int:
        return len(self.paths)

    def donor_index(self, video_id: str, query: str = "caption_text") -> int:
        """Index of the pool video with the largest dot product with the query of ``video_id``."""
        table = self.queries.get(query)
        if table is None or video_id not in table:
            raise KeyError(f"donor pool has no {query!r} query for video {video_id!r}; known query modes: "
                           f"{sorted(self.queries)}")
        scores = self.embeddings @ table[video_id].float()
        banned = [i for i, v in enumerate(self.ids) if v == video_id] + self.excluded.get(video_id, [])
        scores[banned] = -float("inf")  # never the video itself, nor a video that carries its answer
        if len(banned) >= len(self.ids):
            raise ValueError(f"donor pool: every pool video is excluded for {video_id!r}")
        return int(torch.argmax(scores))

    def donor_frames(self, video_id: str, k: int, query: str = "caption_text") -> torch.Tensor:
        """k frames sampled uniformly over the whole donor video: uint8 (k, h, w, 3)."""
        path = self.paths[self.donor_index(video_id, query)]
        return read_frames(path, uniform_frame_indices(video_frame_count(path), k))

    def plan(self, video_ids: Sequence[str], query: str = "caption_text") -> dict[str, str]:
        """{test video id: donor video id} (for the run record)."""
        return {v: self.ids[self.donor_index(v, query)] for v in video_ids}


def choose_pool(ids: Sequence[str], pool_size: int, seed: int) -> list[int]:
    """Positions of up to ``pool_size`` distinct ids, a seeded random subset kept in file order."""
    first = list(dict.fromkeys(ids))
    pos = {v: i for i, v in reversed(list(enumerate(ids)))}
    rng = np.random.default_rng(seed)
    keep = sorted(rng.permutation(len(first))[:pool_size].tolist())
    return [pos[first[i]] for i in keep]


def pool_embeddings(paths: Sequence[str], encode: Callable[[list[str]], torch.Tensor], cache_file: Path | None,
                    batch: int = 64) -> torch.Tensor:
    """(P, D) pooled embeddings of ``paths`` via ``encode(paths) -> (n, D)``, cached in ``cache_file``."""
    digest = hashlib.sha1("\n".join(paths).encode()).hexdigest()
    if cache_file is not None and (saved := load_cached(cache_file)) is not None:
        if saved.get("paths_sha1") == digest:
            return saved["embeddings"]
        log.warning("donor pool cache %s is for another pool; re-encoding", cache_file)
    out = []
    for i in range(0, len(paths), batch):
        out.append(encode(list(paths[i:i + batch])).float())
        log.info("donor pool: encoded %d/%d videos", min(i + batch, len(paths)), len(paths))
    emb = torch.cat(out)
    if cache_file is not None:
        save_cached(cache_file, {"paths_sha1": digest, "paths": list(paths), "embeddings": emb})
    return emb
