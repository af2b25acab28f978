"""``adapter=tent``: Tent (Wang et al., ICLR 2021) as retrieval TTA.

Objective: L = (1/b) Σ_i H(p_i), the mean entropy of the softmax over the gallery at τ = 0.02; no sample
selection, no regulariser.

Original vs retrieval (docs/methods/tent.md):

* original (``DequanWang/tent``): BatchNorm affines with batch statistics; CIFAR-10-C Adam lr 1e-3 batch 200,
  ImageNet SGD (momentum 0.9) lr 2.5e-4 batch 64; one step per batch; reset per (corruption, severity);
* here: the same loss on gallery logits, adapting the query-encoder LayerNorm affines with AdamW (lr 3e-5,
  weight decay 1e-4), 3 steps per batch of 16 — the shared protocol.

Presets: ``orig`` and ``vtr_tta`` share the objective (the ``vtr_tta`` and TCR ports agree with the paper);
``vtr_tta`` only switches to the ports' legacy shared forward (:mod:`tta.adapters.components.entropy`).
"""

from __future__ import annotations

import torch

from tta.adapters.base import QueryForward
from tta.adapters.components.entropy import GalleryEntropyAdapter, softmax_entropy


class TentAdapter(GalleryEntropyAdapter):
    """Entropy minimisation over the gallery (see the module docstring; options of
    :class:`~tta.adapters.components.entropy.GalleryEntropyAdapter`)."""

    def adapt_loss(self, fw: QueryForward, step: int) -> torch.Tensor:
        """fw.sims: (b, G) -> L = mean_i H(softmax(s_i / τ))."""
        return softmax_entropy(self.logits(fw.sims)).mean()
