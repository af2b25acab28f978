"""``adapter=hsm``: the source model plus HSM posterior reranking, no gradient (training-free).

HAT-VTR's "w.o. training" ablation (Zhang et al., 2026, Table 38): the frozen model scores each batch, the Hubness
Suppression Memory (Sec. 4.2, Eq. 5-6, Use 2) refines the rows against the bank of earlier raw rows, and the raw
rows enter the bank. Equivalent to ``adapter=hatvtr adapter.method.adapt.enabled=false`` (docs/methods/hsm.md).
"""

from __future__ import annotations

import torch

from tta.adapters.base import BatchRecord, OnlineAdapter
from tta.adapters.components.hsm import HSMConfig, HubnessSuppressionMemory
from tta.adapters.components.options import build_options
from tta.adapters.hatvtr import STRICT_REPRODUCTION


class HSMOnlyAdapter(OnlineAdapter):
    """Source scores reranked by the HSM.

    Args:
        hsm: :class:`HSMConfig` options (``enabled_select`` is irrelevant here).
        strict_reproduction: use the code's HSM capacity max(1, ⌊0.1·G⌋) (as ``adapter=hatvtr``'s switch).
        reset_policy, predict_with: see :class:`OnlineAdapter`.
    """

    state_keys = ("hsm",)
    option_types = (HSMConfig,)

    def __init__(self, hsm: dict | None = None, strict_reproduction: bool = False, reset_policy: str = "per_shift",
                 predict_with: str = "last_forward"):
        super().__init__(steps=0, reset_policy=reset_policy, predict_with=predict_with)
        force = STRICT_REPRODUCTION["hsm"] if strict_reproduction else None
        self.hsm = HubnessSuppressionMemory(build_options(HSMConfig, hsm, force=force))

    def refine_scores(self, sims: torch.Tensor) -> torch.Tensor:
        return self.hsm.rerank(sims)

    def reset_state(self) -> None:
        self.hsm.reset()

    def on_batch_end(self, record: BatchRecord) -> None:
        self.counters["neg_sim_share"] = self.hsm.negative_share
        self.counters.update(self.hsm.bank_stats())
