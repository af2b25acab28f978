"""High-level temporal shift of MLVP: temporal scrambling (docs/shifts/mlvp.md, App. E.3), trim then reorder chunks.

q_s = 0.60, 0.70, 0.80, 0.90, 0.95. Default (``semantics: code``): q is the fraction **trimmed**, so 40, 30, 20,
10 and 5 % of the video is kept — the only reading in which severity is monotone; ``paper_retention`` keeps q
(Table 37's "retention ratios"). Group B: the shift receives every decoded frame (T = the decoded count; the code
uses the container's count, which can differ by a few frames) and, with the item's Python ``random``:

1. K = ⌊T·q_trim⌋; a ~ U{0..K}; keep the contiguous span [a, T - (K - a)) of length m >= 1;
2. split it into n_c = min(12, m) contiguous chunks whose sizes differ by at most 1;
3. reorder: s1 one adjacent swap at a random position in 0..n_c-2; s2-s4 min(s, ⌊n_c/2⌋) disjoint random
   transpositions at any distance; s5 a full random shuffle;
4. sample ``num_frames`` positions from the concatenated, reordered index list: ⌊linspace(0, m-1, n)⌋ if m >= n,
   else n draws with replacement in draw order.

The scrambled order is kept; the returned clip has ``num_frames`` frames (the pipeline's uniform rule over them
is the identity).
"""

from __future__ import annotations

import numpy as np
import torch

from tta.shifts.registry import register_video_shift
from tta.shifts.video.common import ShiftContext, python_rng

SCRAMBLE_Q = (0.60, 0.70, 0.80, 0.90, 0.95)
MAX_CHUNKS = 12


def scramble_indices(t: int, severity: int, rng, n: int = 12, semantics: str = "code") -> list[int]:
    """Frame indices (into the T decoded frames) of the scrambled clip, in output order (docs/shifts/mlvp.md, App. E.3)."""
    if semantics not in ("code", "paper_retention"):
        raise ValueError(f"temporal_scrambling semantics must be code or paper_retention, got {semantics!r}")
    q = SCRAMBLE_Q[severity - 1]
    trim = q if semantics == "code" else 1.0 - q
    k = min(int(t * trim), t - 1)
    a = rng.randint(0, k)
    span = list(range(a, t - (k - a)))
    m = len(span)
    n_c = min(MAX_CHUNKS, m)
    chunks = [list(c) for c in np.array_split(np.asarray(span), n_c)]
    if n_c >= 2:
        if severity == 1:
            p = rng.randrange(n_c - 1)
            chunks[p], chunks[p + 1] = chunks[p + 1], chunks[p]
        elif severity <= 4:
            pos = rng.sample(range(n_c), 2 * min(severity, n_c // 2))
            for i, j in zip(pos[0::2], pos[1::2], strict=True):
                chunks[i], chunks[j] = chunks[j], chunks[i]
        else:
            rng.shuffle(chunks)
    order = [int(i) for c in chunks for i in c]
    if m >= n:
        return [order[int(p)] for p in np.floor(np.linspace(0, m - 1, n))]
    return [order[rng.randrange(m)] for _ in range(n)]


@register_video_shift("temporal_scrambling", level="high", group="B")
def temporal_scrambling(frames: torch.Tensor, severity: int, generator: torch.Generator,
                        context: ShiftContext | None = None, semantics: str = "code") -> torch.Tensor:
    """frames: every decoded frame uint8 (T, H, W, 3) -> ``num_frames`` scrambled frames uint8 (docs/shifts/mlvp.md, App. E.3)."""
    n = context.num_frames if context is not None else 12
    idx = scramble_indices(frames.shape[0], severity, python_rng(generator), n, semantics)
    return frames[torch.tensor(idx, device=frames.device)]
