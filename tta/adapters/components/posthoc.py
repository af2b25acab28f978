"""Gradient-free post-hoc score refinement: QB-Norm (inverted softmax over a query bank) and dual softmax (DSL).

Both reduce hubness by normalising each gallery item's scores against how strongly *other* queries retrieve it
(HAT-VTR Sec. 4.2 cites both; its HSM column term is DSL's prior). Usable

* alone: ``adapter=qbnorm`` / ``adapter=dsl`` (:mod:`tta.adapters.qbnorm`, :mod:`tta.adapters.dsl`: a
  :class:`PostHocAdapter`, the frozen source model + the refiner);
* after any adapter: ``posthoc=qbnorm`` / ``posthoc=dsl`` (``conf/posthoc/``; :func:`tta.adapters.build_adapter` sets
  :attr:`OnlineAdapter.posthoc`, applied to the rows the adapter returns after its own ``refine_scores``).

Online, the query bank is the stream (``bank: stream``): the raw rows the refiner has received so far, kept in
stream order (``bank_size`` = the most recent rows; null = all). It empties at every reset (per shift).

**QB-Norm** (Bogolin et al., CVPR 2022; ``ioanacroi/qb-norm``). Inverted softmax (IS) with bank B:
s'(q, g_j) = exp(β s(q, g_j)) / Σ_{b∈B} exp(β s(b, g_j)), β = 20. Dynamic IS (``dynamic: true``, the paper's
QB-Norm): only queries whose top-1 gallery item is in the activation set — the items in the top-k (k = 1) of some
bank query — are normalised; the other rows keep their raw scores. The original bank is the *training* captions
scored against the test gallery (``bank: train_split``: the first ``bank_size`` training pairs of the run's dataset,
one caption per video, encoded by the source model before the first batch; null = the whole split); the stream
bank is the online analogue (the HAT-VTR protocol has no source data). With the stream bank the current batch
joins the bank only after it is scored (``include_current: false``), so bank and normalised queries stay
disjoint as in the paper and dynamic IS is not trivially always on; the first batch of a shift is returned raw.
Normalised rows are returned as log ratios, β s(q, g) − log Σ_b exp(β s(b, g)): the same ranking per query as
the ratio, free of overflow.

**DSL** (Cheng et al., 2021, the dual softmax at inference): s'(q, g_j) = s(q, g_j) · softmax_q(λ s(·, g_j)),
the prior over queries taken down each gallery column of the bank stacked with the current batch
(``include_current: true``, as in the original's whole-test-set prior and HAT-VTR's HSM), λ = 100. The original's
extra factor (the number of queries) does not change any ranking and is left out. ``bank: batch`` uses the
current batch only.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tta.adapters.base import OnlineAdapter
from tta.adapters.components.options import check_choice
from tta.data.source_split import ALL_PAIRS
from tta.utils.bounds import POSITIVE, Int, Options, bound


class ScoreRefiner:
    """A stateful, gradient-free refiner of (b, G) score rows: ``__call__`` per batch in stream order.

    ``state_keys`` names the attributes that are its resumable stream state (saved with the adapter's);
    ``option_types`` its option dataclasses, whose bounds check the config's ``posthoc.*`` keys.
    """

    name = "none"
    source_split_size = 0
    state_keys: tuple[str, ...] = ()
    option_types: tuple[type, ...] = ()

    def __call__(self, sims: torch.Tensor) -> torch.Tensor:
        return sims

    def reset(self) -> None:
        """Clear the stream state (called with the adapter's reset)."""

    def stats(self) -> dict[str, float]:
        """Counters for results.json."""
        return {}

    def prepare(self, adapter: OnlineAdapter) -> None:
        """Source-model preparations before the first batch (e.g. a training-split bank)."""


class StreamBank:
    """The most recent raw score rows, (n, G), on the rows' device.

    Args:
        capacity: rows kept (None = all).
    """

    def __init__(self, capacity: int | None = None):
        if capacity is not None and capacity < 1:
            raise ValueError(f"bank capacity must be >= 1 or null, got {capacity}")
        self.capacity = capacity
        self.rows: torch.Tensor | None = None

    def __len__(self) -> int:
        return 0 if self.rows is None else self.rows.shape[0]

    def append(self, sims: torch.Tensor) -> None:
        rows = sims.detach() if self.rows is None else torch.cat([self.rows, sims.detach().to(self.rows)])
        self.rows = rows if self.capacity is None else rows[-self.capacity:]

    def reset(self) -> None:
        self.rows = None


def inverted_softmax_log(sims: torch.Tensor, bank: torch.Tensor, beta: float) -> torch.Tensor:
    """log IS: (b, G) queries, (n, G) bank -> β s − logsumexp_bank(β s_bank) per column, (b, G)."""
    norm = torch.logsumexp(beta * bank.double(), dim=0)
    return (beta * sims.double() - norm).to(sims.dtype)


@dataclass
class QBNormOptions(Options):
    """The numeric options of :class:`QBNorm` (``posthoc.beta``, ``posthoc.k``)."""

    beta: float = bound(POSITIVE)
    k: int = bound(Int(1))


class QBNorm(ScoreRefiner):
    """Querybank normalisation with (dynamic) inverted softmax (module docstring).

    Args:
        beta: inverse temperature β of the inverted softmax (QB-Norm: 20).
        dynamic: dynamic inverted softmax (normalise only rows whose top-1 is in the activation set).
        k: top-k of the bank queries that forms the activation set (QB-Norm: 1).
        bank: ``stream`` | ``train_split``.
        bank_size: rows kept in the stream bank / training pairs in the training bank (null = all).
        include_current: the current batch joins the bank before it is normalised (stream bank only).
    """

    name = "qbnorm"
    state_keys = ("bank", "normalised", "seen")
    option_types = (QBNormOptions,)

    def __init__(self, beta: float = 20.0, dynamic: bool = True, k: int = 1, bank: str = "stream",
                 bank_size: int | None = None, include_current: bool = False):
        o = QBNormOptions(beta, k)
        self.beta, self.dynamic, self.k = float(o.beta), bool(dynamic), int(o.k)
        self.bank_kind = check_choice("bank", bank, ("stream", "train_split"))
        self.include_current = bool(include_current)
        self.bank = StreamBank(bank_size if self.bank_kind == "stream" else None)
        self.source_split_size = (bank_size or ALL_PAIRS) if self.bank_kind == "train_split" else 0
        self.normalised = 0
        self.seen = 0

    def prepare(self, adapter: OnlineAdapter) -> None:
        if self.bank_kind != "train_split" or len(self.bank):
            return
        split = adapter.source_split
        if split is None:
            raise RuntimeError("qbnorm bank=train_split needs clean training-split data (attached by tta.run)")
        with torch.no_grad():
            for batch in split.batches(32):
                batch = {k: v.to(adapter.device) if torch.is_tensor(v) else v for k, v in batch.items()}
                self.bank.append(adapter.forward_queries(batch).sims.float())

    def __call__(self, sims: torch.Tensor) -> torch.Tensor:
        stream = self.bank_kind == "stream"
        if stream and self.include_current:
            self.bank.append(sims)
        out = sims
        if len(self.bank):
            bank = self.bank.rows.to(sims.device)
            normed = inverted_softmax_log(sims, bank, self.beta)
            if self.dynamic:
                active = torch.zeros(sims.shape[1], dtype=torch.bool, device=sims.device)
                active[bank.topk(min(self.k, bank.shape[1]), dim=1).indices.flatten()] = True
                rows = active[sims.argmax(dim=1)]
                out = torch.where(rows.unsqueeze(1), normed, sims)
                self.normalised += rows.sum()  # on the device: read back when the stats are
            else:
                out = normed
                self.normalised += sims.shape[0]
        self.seen += sims.shape[0]
        if stream and not self.include_current:
            self.bank.append(sims)
        return out

    def reset(self) -> None:
        if self.bank_kind == "stream":
            self.bank.reset()

    def stats(self) -> dict[str, float]:
        return {"qbnorm/normalised_rate": self.normalised / max(1, self.seen), "qbnorm/bank_rows": len(self.bank)}


@dataclass
class DualSoftmaxOptions(Options):
    """The numeric option of :class:`DualSoftmax` (``posthoc.inv_temp``)."""

    inv_temp: float = bound(POSITIVE)


class DualSoftmax(ScoreRefiner):
    """Dual-softmax inference prior (module docstring).

    Args:
        inv_temp: λ of softmax_q(λ s) (100, CLIP's logit scale; HAT-VTR's HSM α).
        bank: ``stream`` (earlier rows + the current batch) | ``batch`` (the current batch only).
        bank_size: rows kept in the stream bank (null = all).
        include_current: the current batch takes part in its own prior (stream bank).
    """

    name = "dsl"
    state_keys = ("bank",)
    option_types = (DualSoftmaxOptions,)

    def __init__(self, inv_temp: float = 100.0, bank: str = "stream", bank_size: int | None = None,
                 include_current: bool = True):
        self.inv_temp = float(DualSoftmaxOptions(inv_temp).inv_temp)
        self.bank_kind = check_choice("bank", bank, ("stream", "batch"))
        self.include_current = bool(include_current)
        self.bank = StreamBank(bank_size)

    def __call__(self, sims: torch.Tensor) -> torch.Tensor:
        if self.bank_kind == "batch":
            stack = sims
        else:
            if self.include_current:
                self.bank.append(sims)
            if not len(self.bank):
                self.bank.append(sims)
                return sims
            stack = self.bank.rows.to(sims.device)
        norm = torch.logsumexp(self.inv_temp * stack.double(), dim=0)
        prior = torch.exp(self.inv_temp * sims.double() - norm)
        out = (sims.double() * prior).to(sims.dtype)
        if self.bank_kind == "stream" and not self.include_current:
            self.bank.append(sims)
        return out

    def reset(self) -> None:
        self.bank.reset()

    def stats(self) -> dict[str, float]:
        return {"dsl/bank_rows": len(self.bank)}


class PostHocAdapter(OnlineAdapter):
    """The frozen source model followed by a gradient-free refiner (base of ``adapter=qbnorm`` / ``adapter=dsl``).

    Args:
        refiner: a :class:`ScoreRefiner` (Hydra instantiates it from ``conf/posthoc/<name>.yaml``).
        reset_policy, predict_with: see :class:`OnlineAdapter`.
    """

    state_parts = ("refiner",)  # the refiner's declared state is resumable

    def __init__(self, refiner: ScoreRefiner, reset_policy: str = "per_shift", predict_with: str = "last_forward"):
        super().__init__(steps=0, reset_policy=reset_policy, predict_with=predict_with)
        self.refiner = refiner

    def refine_scores(self, sims: torch.Tensor) -> torch.Tensor:
        return self.refiner(sims)

    def reset_state(self) -> None:
        self.refiner.reset()

    def on_batch_end(self, record) -> None:
        self.counters.update(self.refiner.stats())

    def needs_source_split(self) -> int:
        return max(int(self.refiner.source_split_size), super().needs_source_split())

    def prepare(self) -> None:
        super().prepare()
        self.refiner.prepare(self)
