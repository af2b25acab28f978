"""CompLoss, the hierarchical pairwise preference loss of VideoComp (Sec. 3.2).

The paper's Eq. (2) is lost from the extracted text; what it states is an ordering sim(V, T0) > sim(V, T1) > ...
for the positive T0 and negatives of increasing disruption. The reading implemented here is a logistic pairwise
preference over every ordered pair of the chain, L_pref = mean_{i<j} -log σ((s_i - s_j) / τ), added to InfoNCE
with weight λ (docs/methods/videocomp.md).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def comp_loss(sims: torch.Tensor, tau: float) -> torch.Tensor:
    """Pairwise preference loss of a (B, K) score chain: column 0 the positive, columns 1.. increasingly disrupted.

    -log σ(x) = softplus(-x), so each ordered pair i < j costs softplus((s_j - s_i) / τ).
    """
    if sims.dim() != 2 or sims.shape[1] < 2:
        raise ValueError(f"comp_loss needs (B, K >= 2) scores, got shape {tuple(sims.shape)}")
    i, j = torch.triu_indices(sims.shape[1], sims.shape[1], offset=1, device=sims.device)
    return F.softplus((sims[:, j] - sims[:, i]) / tau).mean()
