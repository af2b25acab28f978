"""The OnlineAdapter base (ARCHITECTURE.md, "The adapter idiom"; protocol of spec/hatvtr.md §4).

The base owns the mechanics of online test-time adaptation of a retrieval model over a query stream:
the gallery (encoded once by the source model, never updated), the optimizer (built in ``setup("test")``, since
Lightning builds optimizers only when fitting), a snapshot of only the adapted parameters and the optimizer state
for :meth:`reset`, ``steps`` updates per batch, the reset policy, score collection in stream order and per-batch
history. A method overrides only what it changes::

    configure_model()            train/eval modes, requires_grad (default: all frozen, eval)
    params_to_adapt()            e.g. LayerNorms of the query-side encoder; empty = gradient-free
    adapt_loss(fw, step)         a scalar Tensor, or None to skip the update
    refine_scores(sims)          post-hoc refinement of the returned rows (e.g. HSM); default identity
    reset_state()                memories, EMAs, queues

Per batch (``steps`` = S): S times [forward -> loss -> backward -> step]; the scores are those of the last
forward, computed before its update (``predict_with: last_forward``, spec/hatvtr.md §4), or of an extra no-grad
forward after the last update (``post_update``). Run with ``Trainer(inference_mode=False).test``.

Any adapter can be followed by a gradient-free score refiner (:attr:`posthoc`, the ``posthoc=`` config group,
:mod:`tta.adapters.posthoc`), applied after :meth:`refine_scores` and reset with the adapter. A method that needs
clean source data before adapting asks for it with :meth:`needs_source_split` and prepares in :meth:`prepare`.
"""

from __future__ import annotations

import copy
import logging
import math
import time
from dataclasses import dataclass, field

import lightning as L
import torch
from torch import nn

from tta.models.retrieval import RetrievalModel

log = logging.getLogger(__name__)

RESET_POLICIES = ("per_shift", "episodic", "never")
# attributes that are not the adapter's resumable state: bound inputs, the live model/optimizer, wiring
_NOT_RESUME_STATE = frozenset({"model", "optimizer", "_snapshot", "source_split", "batch_callbacks", "gt",
                               "gallery_class", "checkpoint_fn", "_resume", "_batch_offset"})
PREDICT_WITH = ("last_forward", "post_update")


@dataclass
class QueryForward:
    """One forward of a query batch.

    Attributes:
        feats: query features — (B, T, D) frame features (v2t) or (B, D) caption features (t2v).
        sims: (B, G) raw similarity to the whole gallery (cosine, no temperature).
    """

    feats: torch.Tensor
    sims: torch.Tensor


@dataclass
class BatchRecord:
    """What one batch leaves in the run history."""

    batch: int
    size: int
    losses: list[float] = field(default_factory=list)
    skipped_updates: int = 0
    running_r1: float = float("nan")
    adapt_s: float = 0.0
    segment: int = 0  # which shift of a stream scenario (tta.data.segments); 0 for a single-shift run
    extras: dict = field(default_factory=dict)  # method-specific per-batch counters (e.g. selected share)


class OnlineAdapter(L.LightningModule):
    """Base of every online adapter (``adapter=source`` is this base with nothing adapted).

    Args:
        steps: optimisation steps per batch.
        lr: learning rate (a float, or a dict per task, e.g. {v2t: 3e-4, t2v: 3e-5}).
        weight_decay: AdamW weight decay.
        betas: AdamW betas.
        reset_policy: ``per_shift`` (reset at the start of each shift), ``episodic`` (before every batch) or ``never``.
        predict_with: ``last_forward`` or ``post_update`` (see module docstring).
    """

    def __init__(self, steps: int = 0, lr: float | dict = 0.0, weight_decay: float = 0.0,
                 betas: tuple[float, float] = (0.9, 0.999), reset_policy: str = "per_shift",
                 predict_with: str = "last_forward"):
        super().__init__()
        if reset_policy not in RESET_POLICIES:
            raise ValueError(f"reset_policy must be one of {RESET_POLICIES}, got {reset_policy!r}")
        if predict_with not in PREDICT_WITH:
            raise ValueError(f"predict_with must be one of {PREDICT_WITH}, got {predict_with!r}")
        self.steps, self.lr_cfg, self.weight_decay, self.betas = int(steps), lr, weight_decay, tuple(betas)
        self.reset_policy, self.predict_with = reset_policy, predict_with
        self.model: RetrievalModel | None = None
        self.task = "v2t"
        self.optimizer: torch.optim.Optimizer | None = None
        self._snapshot: dict | None = None
        self.rows: list[torch.Tensor] = []
        self.indices: list[torch.Tensor] = []
        self.history: list[BatchRecord] = []
        self.gt: torch.Tensor | None = None
        # (G,) relevance class of each gallery item when a query has several relevant items (multi-caption v2t:
        # the video of each caption); None = 1:1, the class of gallery item j is j
        self.gallery_class: torch.Tensor | None = None
        self.counters: dict[str, int] = {"updates": 0, "skipped_updates": 0, "nonfinite_losses": 0, "resets": 0}
        # optional gradient-free refiner applied after refine_scores (`posthoc=` group, tta.adapters.posthoc)
        self.posthoc = None
        # clean source-split data, attached by the runner when needs_source_split() > 0 (tta.data.source_split)
        self.source_split = None
        self._segment: int | None = None  # the stream segment (shift) being scored
        # called with each finished BatchRecord (the runner's loggers: per-batch curves)
        self.batch_callbacks: list = []
        # resumable runs (tta.run): called with the number of finished batches after each batch; a state to load
        self.checkpoint_fn = None
        self._resume: dict | None = None
        self._batch_offset = 0  # batches finished before this process (a resumed run)

    # ------------------------------------------------------------------------------------------------ binding
    def bind(self, model: RetrievalModel, task: str, gallery: torch.Tensor, gt: torch.Tensor | None = None,
             gallery_class: torch.Tensor | None = None) -> None:
        """Attach the model, the direction and the (precomputed, frozen) gallery features.

        Args:
            model: the source retrieval model.
            task: ``v2t`` (video queries, caption gallery) or ``t2v``.
            gallery: (G, D) caption features (v2t) or (G, T, D) frame features (t2v).
            gt: (Q,) ground-truth gallery index per query (the relevance class of the query when
                ``gallery_class`` is given), used only for diagnostics: the running R@1 and the share of correct
                pseudo-targets in the history.
            gallery_class: (G,) relevance class of each gallery item for multi-caption galleries (v2t: the video
                of each caption); None for 1:1 data.
        """
        if task not in ("v2t", "t2v"):
            raise ValueError(f"task must be v2t or t2v, got {task!r}")
        self.model, self.task = model, task
        self.register_buffer("gallery", gallery, persistent=False)
        self.gt, self.gallery_class = gt, gallery_class
        self.configure_model()

    @property
    def query_side(self) -> str:
        return "video" if self.task == "v2t" else "text"

    @property
    def lr(self) -> float:
        if isinstance(self.lr_cfg, (int, float)):
            return float(self.lr_cfg)
        return float(self.lr_cfg[self.task])

    # -------------------------------------------------------------------------------------------------- hooks
    def configure_model(self) -> None:
        """Default: everything frozen and in eval mode, then the parameters of :meth:`params_to_adapt` trainable."""
        self.model.eval()
        self.model.requires_grad_(False)
        for p in self.params_to_adapt():
            p.requires_grad_(True)

    def params_to_adapt(self) -> list[nn.Parameter]:
        return []

    def adapt_loss(self, fw: QueryForward, step: int) -> torch.Tensor | None:
        return None

    def refine_scores(self, sims: torch.Tensor) -> torch.Tensor:
        return sims

    def reset_state(self) -> None:
        """Clear method state (memories, EMAs); called by :meth:`reset`."""

    def on_batch_start(self, batch: dict, record: BatchRecord) -> None:
        """Called before a batch's updates (e.g. to remember ``batch["index"]``); write counters to ``record.extras``."""

    def on_batch_end(self, record: BatchRecord) -> None:
        """Called after a batch is scored and refined."""

    #: the per-step share of queries a method selects for its loss, as it records it in ``BatchRecord.extras``
    #: (a list under this key, or the key inside each ``extras["steps"]`` entry); None = no selection.
    selected_key: str | None = None

    def selected_fraction(self, record: BatchRecord) -> float:
        """Mean share of the batch's queries that the method selected for its loss (NaN if it selects nothing)."""
        if self.selected_key is None:
            return float("nan")
        values = record.extras.get(self.selected_key)
        if values is None:
            values = [s[self.selected_key] for s in record.extras.get("steps", []) if self.selected_key in s]
        return float(sum(values) / len(values)) if values else float("nan")

    def needs_source_split(self) -> int:
        """Clean training-split pairs needed before adapting (0 = none), e.g. EATA's Fisher; the runner then
        attaches :attr:`source_split` before the test loop."""
        return int(getattr(self.posthoc, "source_split_size", 0) or 0)

    def prepare(self) -> None:
        """Source-model preparations once the model is on its device, before the first batch (no update)."""
        if self.posthoc is not None:
            self.posthoc.prepare(self)

    def on_test_start(self) -> None:
        self.prepare()
        if self._resume is not None:  # after setup(): the optimizer exists and the snapshot holds the source weights
            self.load_resume_state(self._resume)
            self._resume = None

    # ------------------------------------------------------------------------------------------------ resume
    def resume_state(self) -> dict:
        """Everything that makes the rest of the stream come out as if never interrupted.

        The adapter's own attributes (all it added to a bare LightningModule: memories, EMAs, queues, running
        means, Fisher, counters, scored rows, history, the current segment), the adapted parameters, the optimizer
        state and the Python / NumPy / torch RNG states. The model, the gallery and the optimizer objects are
        rebuilt by the runner; attributes that hold modules or parameters are references to them and are skipped.
        """
        import random

        import numpy as np

        attrs = {}
        for key, value in vars(self).items():
            if key in _lightning_attrs() or key in _NOT_RESUME_STATE or _holds_module(value):
                continue
            attrs[key] = value
        return {"attrs": attrs, "params": [p.detach().clone() for p in self.params_to_adapt()],
                "optim": self.optimizer.state_dict() if self.optimizer is not None else None,
                "rng": {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate(),
                        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}}

    def load_resume_state(self, state: dict) -> None:
        """Restore :meth:`resume_state` (call after :meth:`setup`, on the freshly bound source model)."""
        import random

        import numpy as np

        for key, value in state["attrs"].items():
            setattr(self, key, value)
        params = self.params_to_adapt()
        if len(params) != len(state["params"]):
            raise ValueError(f"the checkpoint holds {len(state['params'])} adapted tensors, this adapter adapts "
                             f"{len(params)}: it was written by another adapter or model")
        with torch.no_grad():
            for p, saved in zip(params, state["params"], strict=True):
                p.copy_(saved)
        if self.optimizer is not None and state["optim"] is not None:
            self.optimizer.load_state_dict(state["optim"])
        rng = state["rng"]
        torch.set_rng_state(rng["torch"])
        np.random.set_state(rng["numpy"])
        random.setstate(rng["python"])
        if rng.get("cuda") is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(rng["cuda"])

    # ------------------------------------------------------------------------------------------ LN selection
    def query_layernorm_params(self) -> list[nn.Parameter]:
        """Weight and bias of every LayerNorm of the query-side tower (spec/hatvtr.md §4, adapted parameters)."""
        params = []
        for _, ln in self.model.layer_norms(self.query_side):
            params += [p for p in (ln.weight, ln.bias) if p is not None]
        return params

    # ---------------------------------------------------------------------------------------------- mechanics
    def setup(self, stage: str) -> None:
        params = self.params_to_adapt()
        if params and self.steps > 0 and self.optimizer is None:
            self.optimizer = self.build_optimizer(params)
        self._snapshot = self._take_snapshot()

    def build_optimizer(self, params: list[nn.Parameter]) -> torch.optim.Optimizer:
        return torch.optim.AdamW(params, lr=self.lr, betas=self.betas, weight_decay=self.weight_decay)

    def _take_snapshot(self) -> dict:
        return {"params": [p.detach().clone() for p in self.params_to_adapt()],
                "optim": copy.deepcopy(self.optimizer.state_dict()) if self.optimizer else None}

    def reset(self) -> None:
        """Restore the adapted parameters and the optimizer state bit-exactly, and clear method state."""
        if self._snapshot is not None:
            with torch.no_grad():
                for p, saved in zip(self.params_to_adapt(), self._snapshot["params"], strict=True):
                    p.copy_(saved)
            if self.optimizer is not None:
                self.optimizer.load_state_dict(copy.deepcopy(self._snapshot["optim"]))
        self.reset_state()
        if self.posthoc is not None:
            self.posthoc.reset()
        self.counters["resets"] += 1

    def encode_queries(self, batch: dict) -> torch.Tensor:
        if self.task == "v2t":
            return self.model.encode_video(batch["video"])
        return self.model.encode_text(batch["tokens"])

    def forward_queries(self, batch: dict) -> QueryForward:
        feats = self.encode_queries(batch)
        return QueryForward(feats=feats, sims=self.model.similarity(feats, self.gallery))

    def adapt_batch(self, batch: dict, record: BatchRecord) -> torch.Tensor:
        """Run ``steps`` updates on one batch; return the (B, G) raw scores to refine."""
        if not self.steps or self.optimizer is None:
            with torch.no_grad():
                return self.forward_queries(batch).sims
        sims = None
        with torch.enable_grad():
            for step in range(self.steps):
                fw = self.forward_queries(batch)
                sims = fw.sims.detach()
                loss = self.adapt_loss(fw, step)
                if loss is None:
                    record.skipped_updates += 1
                    continue
                if not torch.isfinite(loss):
                    record.skipped_updates += 1
                    self.counters["nonfinite_losses"] += 1
                    log.warning("batch %d step %d: non-finite loss, update skipped", record.batch, step)
                    continue
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                grads_ok = all(p.grad is None or torch.isfinite(p.grad).all() for p in self.params_to_adapt())
                if not grads_ok:
                    record.skipped_updates += 1
                    self.counters["nonfinite_losses"] += 1
                    self.optimizer.zero_grad(set_to_none=True)
                    continue
                self.optimizer.step()
                self.counters["updates"] += 1
                record.losses.append(float(loss.detach()))
        if self.predict_with == "post_update":
            with torch.no_grad():
                sims = self.forward_queries(batch).sims
        return sims

    def begin_segment(self, segment: int) -> None:
        """A new shift of the stream starts: ``per_shift`` and ``episodic`` reset here (the first shift starts from
        the snapshot); ``never`` carries the adapted state into the next shift."""
        if self._segment is not None and self.reset_policy in ("per_shift", "episodic"):
            self.reset()
        self._segment = segment

    def test_step(self, batch: dict, batch_idx: int) -> None:
        batch_idx += self._batch_offset
        segment = int(batch.get("segment", 0))
        if segment != self._segment:
            self.begin_segment(segment)
        elif self.reset_policy == "episodic":
            self.reset()
        record = BatchRecord(batch=batch_idx, size=len(batch["index"]), segment=segment)
        start = time.perf_counter()
        self.on_batch_start(batch, record)
        sims = self.adapt_batch(batch, record)
        with torch.no_grad():
            sims = self.refine_scores(sims.float())
            if self.posthoc is not None:
                sims = self.posthoc(sims)
        self.on_batch_end(record)
        record.adapt_s = time.perf_counter() - start
        self.counters["skipped_updates"] += record.skipped_updates
        self.rows.append(sims.detach().cpu())
        self.indices.append(batch["index"].detach().cpu())
        if self.gt is not None:
            record.running_r1 = self._running_r1()
        self.history.append(record)
        for callback in self.batch_callbacks:
            callback(record)
        if self.checkpoint_fn is not None:
            self.checkpoint_fn(batch_idx + 1)
        if record.losses:
            self.log("adapt/loss", record.losses[-1], on_step=True, batch_size=record.size)
        if not math.isnan(record.running_r1):
            self.log("stream/R@1", record.running_r1, on_step=True, prog_bar=True, batch_size=record.size)

    def is_relevant(self, picked: torch.Tensor, queries: torch.Tensor) -> torch.Tensor | None:
        """Whether gallery item ``picked[i]`` is relevant to stream query ``queries[i]`` (diagnostics only);
        None when the runner gave no ground truth."""
        if self.gt is None:
            return None
        picked, want = picked.cpu(), self.gt[queries.cpu()].cpu()
        if self.gallery_class is not None:
            picked = self.gallery_class.cpu()[picked]
        return picked == want

    def _running_r1(self) -> float:
        last = self.rows[-1]
        idx = self.indices[-1]
        hit = self.is_relevant(last.argmax(dim=1), idx).sum().item()
        self._hits = getattr(self, "_hits", 0) + hit
        self._seen = getattr(self, "_seen", 0) + len(idx)
        return 100.0 * self._hits / self._seen

    def scores(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(Q, G) scored rows in stream order and the (Q,) query indices they belong to."""
        if not self.rows:
            raise RuntimeError("no batch was scored")
        return torch.cat(self.rows), torch.cat(self.indices)


def _lightning_attrs() -> frozenset:
    """Attribute names every LightningModule has (not adapter state)."""
    global _LIGHTNING_ATTRS
    if _LIGHTNING_ATTRS is None:
        _LIGHTNING_ATTRS = frozenset(vars(L.LightningModule()))
    return _LIGHTNING_ATTRS


_LIGHTNING_ATTRS: frozenset | None = None


def _holds_module(value) -> bool:
    if isinstance(value, (nn.Module, nn.Parameter, torch.optim.Optimizer)):
        return True
    if isinstance(value, (list, tuple)):
        return any(isinstance(v, (nn.Module, nn.Parameter)) for v in value)
    return False
