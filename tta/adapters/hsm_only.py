"""``adapter=hsm``: the source model plus HSM posterior reranking, no gradient (training-free).

HAT-VTR's "w.o. training" ablation (Zhang et al., 2026, Table 38; spec/hatvtr.md §9): the frozen model scores each
batch, the Hubness Suppression Memory (Sec. 4.2, Eq. 5-6; spec §5 Use 2) refines the rows against the bank of earlier
raw rows, and the raw rows enter the bank. Equivalent to ``adapter=hatvtr adapter.method.adapt.enabled=false``.
"""

from __future__ import annotations

import torch

from tta.adapters.base import BatchRecord, OnlineAdapter
from tta.adapters.hsm import HSMConfig, HubnessSuppressionMemory, build_config


class HSMOnlyAdapter(OnlineAdapter):
    """Source scores reranked by the HSM.

    Args:
        hsm: :class:`HSMConfig` options (``enabled_select`` is irrelevant here).
        strict_reproduction: use the code's HSM capacity max(1, ⌊0.1·G⌋) (spec §8 item 3).
        reset_policy, predict_with: see :class:`OnlineAdapter`.
    """

    def __init__(self, hsm: dict | None = None, strict_reproduction: bool = False, reset_policy: str = "per_shift",
                 predict_with: str = "last_forward"):
        super().__init__(steps=0, reset_policy=reset_policy, predict_with=predict_with)
        cfg = build_config(HSMConfig, hsm)
        if strict_reproduction:
            cfg = HSMConfig(**{**vars(cfg), "capacity": "gallery_fraction"})
        self.hsm = HubnessSuppressionMemory(cfg)

    def refine_scores(self, sims: torch.Tensor) -> torch.Tensor:
        return self.hsm.rerank(sims)

    def reset_state(self) -> None:
        self.hsm.reset()

    def on_batch_end(self, record: BatchRecord) -> None:
        self.counters["neg_sim_share"] = self.hsm.negative_share
        self.counters.update(self.hsm.bank_stats())
