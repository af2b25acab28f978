"""``adapter=read``: READ (Yang et al., ICLR 2024) mapped to dual-encoder retrieval (docs/methods/read.md).

Objective, with p_i = softmax(s_i / τ) over the gallery (τ = 0.02), p̂_i = max_j p_ij and γ = e^{−1}:

* reliability-bias term L_ra = (1/b) Σ_i p̂_i (1 + ln γ − ln p̂_i) (= (1/b) Σ_i −p̂_i ln p̂_i at γ = e^{−1});
  gradient descent raises p̂ when p̂ > γ and lowers it otherwise, so confident predictions get more confident
  and unreliable ones are flattened;
* balance term L_bal = H(softmax(Σ_i p_i)), the softmax of the *summed* probability vector (the original's
  form, not the normalised batch mean);
* L = L_ra − L_bal.

What it adapts in our backbones (``params``):

* ``ln`` (default, the protocol): the LayerNorm affines of the query-side encoder — the vision tower's in v2t
  (CLIP4Clip and X-Pool), the text tower's in t2v. The original adapts the Q, K and V projections of the first
  shared fusion block of CAV-MAE; a dual encoder has no fusion layer, so TCR's ``read.py`` (and the vtr_tta
  port) apply the loss to the query-encoder LayerNorms like every other baseline.
* ``xpool_qkv``: X-Pool's text-conditioned attention projections (q, k, v) — the closest analogue of READ's
  cross-modal fusion layer. It sits on the scoring path of both directions and is shared by query and gallery,
  so this option leaves the query encoder untouched. CLIP4Clip-meanP has no such layer (an error).

Original vs retrieval: Adam lr 1e-4, batch 64, AMP, dropout off, scoring the forward *after* the update; here
AdamW lr 3e-5, weight decay 1e-4, 3 steps per batch of 16, scoring the pre-update forward (``predict_with:
post_update`` gives the original's scoring).

Remark (docs/methods/read.md): with b = 16 and G = 1000, Σ_i p_i spreads a mass of 16 over 1000 entries; its softmax
is nearly uniform, so L_bal ≈ ln G with a very small gradient. ``balance: mean`` (H of the normalised batch
mean) is offered as a labelled deviation.

Presets: ``orig`` (default) = the above with ``balance: sum_softmax``; ``vtr_tta`` (``tta_model/read.py``)
computes the balance term and then drops it, L = L_ra (``balance: none``), and uses the legacy
shared forward.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from tta.adapters.base import QueryForward
from tta.adapters.components.entropy import GalleryEntropyAdapter, softmax_entropy
from tta.adapters.components.options import build_options, check_choice
from tta.models.xpool import XPoolHead
from tta.utils.bounds import NON_NEGATIVE, Options, Real, bound

BALANCES = ("sum_softmax", "mean", "none")
PARAMS = ("ln", "xpool_qkv")


def read_loss(logits: torch.Tensor, gamma: float = math.exp(-1), balance: str = "sum_softmax",
              balance_weight: float = 1.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """READ's objective on (b, G) logits; returns (L, L_ra, L_bal)."""
    probs = logits.softmax(dim=-1)
    top = probs.max(dim=-1).values
    l_ra = (top * (1.0 + math.log(gamma) - top.log())).mean()
    if balance == "sum_softmax":
        l_bal = softmax_entropy(probs.sum(dim=0))
    elif balance == "mean":
        mean = probs.mean(dim=0)
        l_bal = -(mean * mean.clamp_min(1e-30).log()).sum()
    else:
        l_bal = torch.zeros((), device=logits.device)
    return l_ra - balance_weight * l_bal, l_ra, l_bal


@dataclass
class READOptions(Options):
    """READ's options (None = the preset's value; :class:`READAdapter` documents each)."""

    gamma: float = bound(Real(0, 1, lo_open=True), math.exp(-1))
    balance: str | None = None
    balance_weight: float = bound(NON_NEGATIVE, 1.0)
    params: str = "ln"

    def __post_init__(self):
        super().__post_init__()
        check_choice("balance", self.balance, BALANCES)
        check_choice("params", self.params, PARAMS)
        self.gamma, self.balance_weight = float(self.gamma), float(self.balance_weight)


READ_PRESETS = {"orig": {"balance": "sum_softmax"}, "vtr_tta": {"balance": "none"}}


class READAdapter(GalleryEntropyAdapter):
    """Reliability-bias entropy with a balance term (module docstring).

    Args:
        gamma: γ of L_ra (e^{-1}).
        balance: ``sum_softmax`` | ``mean`` | ``none`` (None = preset).
        balance_weight: weight of L_bal (the original's 1).
        params: ``ln`` | ``xpool_qkv``.
        **kwargs: :class:`~tta.adapters.components.entropy.GalleryEntropyAdapter` options.
    """

    option_types = (READOptions,)

    def __init__(self, gamma: float = math.exp(-1), balance: str | None = None, balance_weight: float = 1.0,
                 params: str = "ln", lr: float | dict = 3e-5, **kwargs):
        super().__init__(lr=lr, **kwargs)
        o = build_options(READOptions, dict(gamma=gamma, balance=balance, balance_weight=balance_weight,
                                            params=params), presets=READ_PRESETS, preset=self.preset)
        self.gamma, self.balance, self.balance_weight, self.params = o.gamma, o.balance, o.balance_weight, o.params

    def params_to_adapt(self) -> list[nn.Parameter]:
        if self.params == "ln":
            return self.query_layernorm_params()
        pool = self.model.pool
        if not isinstance(pool, XPoolHead):
            raise ValueError("read params=xpool_qkv needs model=xpool (CLIP4Clip-meanP has no cross-modal layer)")
        return [p for proj in (pool.q_proj, pool.k_proj, pool.v_proj) for p in proj.parameters()]

    def adapt_loss(self, fw: QueryForward, step: int) -> torch.Tensor:
        """fw.sims: (b, G) -> L = L_ra − L_bal."""
        loss, l_ra, l_bal = read_loss(self.logits(fw.sims), self.gamma, self.balance, self.balance_weight)
        self.note_value("read/l_ra", l_ra)
        self.note_value("read/l_bal", l_bal)
        return loss
