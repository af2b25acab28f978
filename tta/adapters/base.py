"""The OnlineAdapter base: online test-time adaptation of a retrieval model over a query stream.

The base owns the mechanics: the gallery (encoded once by the source model, never updated), the optimizer (built in
``setup("test")``; Lightning builds optimizers only when fitting), the reset snapshot of the adapted parameters and
the optimizer state, the update loop with its non-finite guard, the reset policy and the per-batch history; it
composes what the scores leave behind and the resumable state (below). A method (``tta/adapters/<name>.py``, config
``conf/adapter/<name>.yaml``) overrides only what it changes: the hooks of :data:`HOOKS`, each described (what
it receives, what it returns) in docs/adding-an-adapter.md, "The hooks".

Per batch (``steps`` = S): S times [forward -> loss -> backward (-> second pass) -> step -> after_step]; the
scores are those of the last forward, computed before its update (``predict_with: last_forward``, HAT-VTR Sec. 4.3
"Pipeline"), or of an extra no-grad forward after the last update (``post_update``). A non-finite loss or gradient
in either pass skips the update (counted in ``counters["nonfinite_losses"]`` and the record's ``skipped_updates``);
the parameters stay finite. On a CUDA device the skip is decided there (fused AdamW's ``found_inf``), so an update
reads nothing back to the host; a two-pass method's second pass then runs after every first pass (:meth:`second_pass`).
Run with ``Trainer(inference_mode=False).test``. After ``test_step`` returns, ``self.history[-1]`` is that batch's
record; its ``batch`` number is ``len(self.history)`` at the batch's start.

**Components.** What the scores leave behind is a :class:`~tta.adapters.components.scores.KeptScores` (``kept``);
the resumable state is captured and restored by :mod:`tta.adapters.components.resume`, from what each class declares
in ``state_keys`` (the attributes it adds) and ``state_parts`` (objects with their own ``state_keys``).

**Options.** Keyword arguments of ``__init__`` are the config keys; each option block is a typed dataclass built by
:func:`tta.adapters.components.options.build_options`, presets being named overrides resolved by the same helper.
The class names its option dataclasses in ``option_types``, whose declared bounds (tta/utils/bounds.py) check a
run's config before any work and the dataclass when it is built.

Any adapter can be followed by a gradient-free score refiner (:attr:`posthoc`, the ``posthoc=`` config group,
:mod:`tta.adapters.components.posthoc`), applied after :meth:`refine_scores` and reset with the adapter.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import time
from dataclasses import dataclass, field

import lightning as L
import torch
from torch import nn

from tta.adapters.components import resume
from tta.adapters.components.resume import BASE_STATE_KEYS  # noqa: F401 - the contract tests read it here
from tta.adapters.components.scores import KeptScores
from tta.metrics import HUBNESS_KS
from tta.models.retrieval import RetrievalModel
from tta.utils.bounds import NON_NEGATIVE, POSITIVE, Int, Options, Real, bound
from tta.utils.device_values import FUSED_CHECK_DEVICES, non_finite, read_back, without_sync

log = logging.getLogger(__name__)

#: what a method may override (docs/adding-an-adapter.md describes each; a test keeps the two lists equal)
HOOKS = ("configure_model", "params_to_adapt", "forward_queries", "adapt_loss", "second_pass", "after_step",
         "refine_scores", "reset_state", "on_batch_start", "on_batch_end", "needs_source_split", "prepare")
RESET_POLICIES = ("per_shift", "episodic", "never")
PREDICT_WITH = ("last_forward", "post_update")


@dataclass
class ProtocolOptions(Options):
    """The update options of the shared online protocol (conf/adapter/_shared/protocol.yaml), checked by each
    adapter that takes them."""

    steps: int = bound(Int(1))
    lr: float | dict = bound(NON_NEGATIVE)  # a float, or one per direction {v2t: ..., t2v: ...}
    weight_decay: float = bound(NON_NEGATIVE)
    betas: tuple[float, float] = bound(Real(0, 1, hi_open=True))
    temperature: float = bound(POSITIVE)


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


@dataclass
class RunningMean:
    """A running mean over the stream: ``add(total, n)`` adds a sum of ``n`` values and returns the mean."""

    total: float = 0
    count: int = 0

    def add(self, total: float, n: int = 1) -> float:
        self.total, self.count = self.total + total, self.count + n
        return self.total / self.count


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

    #: the method's resumable attributes (module docstring); collected over the class hierarchy
    state_keys: tuple[str, ...] = ()
    #: attributes holding objects whose own declared ``state_keys`` are resumable state (e.g. the refiner)
    state_parts: tuple[str, ...] = ("posthoc",)
    #: the option dataclasses of the method (collected over the class hierarchy): their bounds check the config; the
    #: protocol's apply to the keys of every adapter, and each adapter that takes them builds them
    option_types: tuple[type, ...] = (ProtocolOptions,)
    #: True for two-pass methods: :meth:`second_pass` runs after the first backward of every update
    two_pass: bool = False
    #: the per-step share of queries a method selects for its loss, as it records it in ``BatchRecord.extras``
    #: (a list under this key, or the key inside each ``extras["steps"]`` entry); None = no selection.
    selected_key: str | None = None
    #: the run's stage clock (tta.utils.timing.instrument); the loop charges its updates to "adapt" itself, so
    #: timing adds no call between the loop and ``update``
    stage_clock = None
    _encoder_amp: tuple[str, torch.dtype] | None = None  # (device type, dtype) of the step's autocast

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.two_pass and cls.second_pass is OnlineAdapter.second_pass:  # caught when the method is defined
            raise TypeError(f"{cls.__name__} sets two_pass = True but does not define second_pass()")

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
        self.kept = KeptScores()  # what the stream's scores leave behind (track_scores)
        self.history: list[BatchRecord] = []
        self.gt: torch.Tensor | None = None
        # (G,) relevance class of each gallery item when a query has several relevant items (multi-caption v2t:
        # the video of each caption); None = 1:1, the class of gallery item j is j
        self.gallery_class: torch.Tensor | None = None
        self.counters: dict[str, int] = {"updates": 0, "skipped_updates": 0, "nonfinite_losses": 0, "resets": 0}
        self.r1 = RunningMean()  # hits / queries scored so far (the running R@1)
        # optional gradient-free refiner applied after refine_scores (`posthoc=` group, components/posthoc.py)
        self.posthoc = None
        # clean source-split data, attached by build_adapter when needs_source_split() > 0 (tta.data.source_split)
        self.source_split = None
        self._segment: int | None = None  # the stream segment (shift) being scored
        self.record: BatchRecord | None = None  # the batch being adapted (None outside test_step)
        self.batch_index: torch.Tensor | None = None  # its (B,) stream query indices
        self.compile_encoder: str | None = None  # torch.compile's mode for the query encoder (run key ``compile``)
        self.skips_on_device = False  # the non-finite guard decides on the device (set in setup)
        self._step_condition: torch.Tensor | None = None  # set by update_only_if during a pass
        self._pass_loss: torch.Tensor | None = None  # the loss of the update's last pass
        # a second pass's view of the first: True, or the device bool of whether it will update (second_pass)
        self.first_pass_done: bool | torch.Tensor | None = None

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
        if gt is not None:
            self.track_scores()
        self.configure_model()

    def track_scores(self, k: int = max(HUBNESS_KS), keep_rows: bool = True, head: int = 0) -> None:
        """What the adapter keeps of the scores it produces (before the stream; needs the ground truth of
        :meth:`bind`): every row's rank and top-``k`` neighbours (:class:`StreamScores`), the dense rows only
        when ``keep_rows`` (the runner keeps them for ``save.sims``), and the first ``head`` x ``head`` block."""
        self.kept.track(self.gt, self.gallery.shape[0], self.gallery_class, k, keep_rows, head)

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

    def second_pass(self, batch: dict, step: int) -> torch.Tensor | None:
        """Two-pass methods (``two_pass = True``; checked when the class is defined): the loss to back-propagate
        for the step, or None to skip. Where the skip is decided on the device it runs after every first pass, and
        :attr:`first_pass_done` (a device bool; True on the host) says whether that one will update: what the pass
        moves or records must hold only if it does (e.g. ``torch.where(self.first_pass_done, ...)``)."""
        return None

    def update_only_if(self, condition: torch.Tensor) -> None:
        """Called from :meth:`adapt_loss` (or :meth:`second_pass`): this step updates only if the device bool
        ``condition`` holds (a selection that may come out empty, as EATA's S2), the loss returned being finite either
        way. A method selecting by masks thus reads nothing back: where the skip is decided on the device, the
        condition joins the finite check (a False is a skipped update, not a non-finite one); on the host it is read
        back, and False is a None loss."""
        self._step_condition = condition

    def abandon_update(self) -> None:
        """Undo what a skipped update left behind (e.g. SAM's pending ascent); the base zeroes the gradients."""

    def after_step(self, step: int) -> None:
        """Called after every step of a batch, whether it updated or not."""

    def refine_scores(self, sims: torch.Tensor) -> torch.Tensor:
        return sims

    def reset_state(self) -> None:
        """Clear method state (memories, EMAs); called by :meth:`reset`."""

    def on_batch_start(self, batch: dict, record: BatchRecord) -> None:
        """Called before a batch's updates; write counters to ``record.extras``."""

    def on_batch_end(self, record: BatchRecord) -> None:
        """Called after a batch is scored and refined."""

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
        if self.compile_encoder:
            from tta.utils.compiling import compiled_or_eager

            self.encode_queries = compiled_or_eager(self.encode_queries, f"{type(self).__name__}.encode_queries",
                                                    self.compile_encoder)
        self.prepare()

    # ------------------------------------------------------------------------------------------------ resume
    def resume_keys(self) -> tuple[str, ...]:
        return resume.resume_keys(self)

    def resume_state(self) -> dict:
        """Everything that makes the rest of the stream come out as if never interrupted (references to the live
        objects: serialise the dict right away)."""
        self.settle_history()  # the checkpoint holds plain numbers
        return resume.capture(self)

    def load_resume_state(self, state: dict) -> None:
        """Restore :meth:`resume_state` after :meth:`setup`; valid before or after :meth:`on_test_start`."""
        resume.restore(self, state)

    # ------------------------------------------------------------------------------------------ LN selection
    def query_layernorm_params(self) -> list[nn.Parameter]:
        """Weight and bias of every LayerNorm of the query-side tower (HAT-VTR Sec. 4.3: the adapted parameters)."""
        params = []
        for _, ln in self.model.layer_norms(self.query_side):
            params += [p for p in (ln.weight, ln.bias) if p is not None]
        return params

    # ------------------------------------------------------------------------------------------ reset, setup
    def setup(self, stage: str) -> None:
        params = self.params_to_adapt()
        if params and self.steps > 0 and self.optimizer is None:
            device = self._stream_device(params)
            self.skips_on_device = device.type in FUSED_CHECK_DEVICES and without_sync(device)
            self.optimizer = self.build_optimizer(params)
        self._snapshot = {"params": [p.detach().clone() for p in params],
                          "optim": copy.deepcopy(self.optimizer.state_dict()) if self.optimizer else None}

    def _stream_device(self, params: list[nn.Parameter]) -> torch.device:
        """Where the stream will run: Lightning calls ``setup`` before it moves the model to its device."""
        return self._trainer.strategy.root_device if self._trainer is not None else params[0].device

    def build_optimizer(self, params: list[nn.Parameter]) -> torch.optim.Optimizer:
        """AdamW; fused where the skip is decided on the device (its kernel leaves everything as it was when told
        ``found_inf``; its rounding differs from the plain loop's in the last bit of a few elements)."""
        return torch.optim.AdamW(params, lr=self.lr, betas=self.betas, weight_decay=self.weight_decay,
                                 fused=self.skips_on_device or None)

    def load_optimizer_state(self, saved: dict) -> None:
        """Load an optimizer state dict under this optimizer's own implementation (a state saved by the plain loop on
        the CPU goes into the fused one on a GPU: the step counters are placed where the fused kernel wants them)."""
        groups = [{**g, "fused": own["fused"]} if "fused" in own else g
                  for g, own in zip(saved["param_groups"], self.optimizer.param_groups, strict=True)]
        self.optimizer.load_state_dict({**saved, "param_groups": groups})

    def restore_snapshot(self, only_if: torch.Tensor | None = None) -> None:
        """The adapted parameters and the optimizer state back to their initial values, bit-exactly; with ``only_if``
        (a device bool) only if it holds: read back on the host, element by element where the skip is decided on the
        device (nothing read back)."""
        if self._snapshot is None:
            return
        if only_if is not None and self.skips_on_device:
            self._restore_snapshot_where(only_if)
            return
        if only_if is not None and not bool(only_if):
            return
        with torch.no_grad():
            for p, saved in zip(self.params_to_adapt(), self._snapshot["params"], strict=True):
                p.copy_(saved)
        if self.optimizer is not None:
            self.load_optimizer_state(copy.deepcopy(self._snapshot["optim"]))

    @torch.no_grad()
    def _restore_snapshot_where(self, condition: torch.Tensor) -> None:
        """:meth:`restore_snapshot` where ``condition`` holds, as ``torch.where`` over every parameter and optimizer
        state tensor. A state the snapshot lacks (taken before the first step) is AdamW's initial one: zero moments and
        step count, from which the next step is the step of a state created by it (a test holds the two equal)."""
        params = self.params_to_adapt()
        saved_params, saved_state = self._snapshot_on(condition.device)
        for p, saved in zip(params, saved_params, strict=True):
            p.copy_(torch.where(condition, saved, p))
        if self.optimizer is None:
            return
        for i, p in enumerate(params):
            for key, value in self.optimizer.state.get(p, {}).items():
                if torch.is_tensor(value):
                    initial = saved_state.get(i, {}).get(key)
                    value.copy_(torch.where(condition, 0 if initial is None else initial, value))

    def _snapshot_on(self, device: torch.device) -> tuple[list[torch.Tensor], dict]:
        """The snapshot's parameters and optimizer state tensors on ``device``, copied once (not per restore)."""
        kept = getattr(self, "_snapshot_copy", None)
        if kept is None or kept[0] is not self._snapshot or kept[1] != device:
            state = {i: {k: v.to(device) for k, v in entry.items() if torch.is_tensor(v)}
                     for i, entry in (self._snapshot["optim"] or {}).get("state", {}).items()}
            params = [p.to(device) for p in self._snapshot["params"]]
            kept = self._snapshot_copy = (self._snapshot, device, params, state)
        return kept[2], kept[3]

    def reset(self) -> None:
        """Restore the parameters and the optimizer state, clear method state and the post-hoc refiner's."""
        self.restore_snapshot()
        self.reset_state()
        if self.posthoc is not None:
            self.posthoc.reset()
        self.counters["resets"] += 1

    def begin_segment(self, segment: int) -> None:
        """A new shift of the stream starts: ``per_shift`` and ``episodic`` reset here (the first shift starts from
        the snapshot); ``never`` carries the adapted state into the next shift."""
        if self._segment is not None and self.reset_policy in ("per_shift", "episodic"):
            self.reset()
        self._segment = segment

    # ------------------------------------------------------------------------------------------- the loop
    #: the hooks that need the model's encoders: a method overriding one cannot run on precomputed features
    ENCODER_HOOKS = ("params_to_adapt", "encode_queries", "forward_queries", "adapt_batch", "second_pass")

    @classmethod
    def needs_encoders(cls) -> list[str]:
        """The encoder hooks this class overrides (empty: it scores precomputed query features, ``data=features``)."""
        return [h for h in cls.ENCODER_HOOKS if getattr(cls, h) is not getattr(OnlineAdapter, h)]

    def encode_queries(self, batch: dict) -> torch.Tensor:
        """The query features, float32: the encoder alone runs under the run's autocast (:meth:`test_step`)."""
        if "feats" in batch:  # features exported by python -m tta.export (data=features)
            return batch["feats"].float()
        with self.encoder_autocast():
            feats = self.model.encode_video(batch["video"]) if self.task == "v2t" else self.model.encode_text(
                batch["tokens"])
        return feats.float()

    def encoder_autocast(self) -> contextlib.AbstractContextManager:
        """The autocast the step was called under (``trainer.precision=bf16-mixed`` or ``16-mixed``), for the
        encoders only; elsewhere in a step it is off (:meth:`test_step`)."""
        if self._encoder_amp is None:
            return contextlib.nullcontext()
        return torch.autocast(self._encoder_amp[0], dtype=self._encoder_amp[1])

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
                with self.stage_clock.stage("adapt") if self.stage_clock else contextlib.nullcontext():
                    self.update(batch, fw, step, record)
                self.after_step(step)
        if self.predict_with == "post_update":
            with torch.no_grad():
                sims = self.forward_queries(batch).sims
        return sims

    def update(self, batch: dict, fw: QueryForward, step: int, record: BatchRecord) -> bool | torch.Tensor:
        """One update from the forward ``fw``: loss, backward (and :meth:`second_pass`), optimizer step.
        Returns whether the parameters were updated (a device bool where the skip is decided on the device); a
        skipped update is counted in ``record``."""
        done = self._pass(lambda: self.adapt_loss(fw, step), step, record)
        if done is not False and self.two_pass:
            self.first_pass_done = done
            try:
                done = self._pass(lambda: self.second_pass(batch, step), step, record, after=done)
            finally:
                self.first_pass_done = None
        if done is False:
            return False
        loss = self._pass_loss
        if done is True:
            self.optimizer.step()
            self.counters["updates"] += 1
            record.losses.append(loss.detach())  # a device value: read once, at the end of the stream (settle_history)
            return True
        record.skipped_updates = record.skipped_updates + (~done).long()
        self.optimizer.found_inf = (~done).float()  # fused AdamW: a step told found_inf changes nothing
        try:
            self.optimizer.step()
        finally:
            del self.optimizer.found_inf
        self.counters["updates"] += done.long()
        record.losses.append(torch.where(done, loss.detach(), float("nan")))  # settle_history drops a skip's NaN
        return done

    def _pass(self, compute, step: int, record: BatchRecord,
              after: torch.Tensor | None = None) -> bool | torch.Tensor:
        """One pass of an update: ``compute()`` the loss (with the method's :meth:`update_only_if`) and back-propagate
        it (:meth:`_backward`); ``after`` is the first pass's device decision, when this is a second pass."""
        self._step_condition = None  # this pass's own, not one left by a call outside the loop
        loss = compute()
        wanted, self._step_condition = self._step_condition, None
        if wanted is not None and not self.skips_on_device and not bool(wanted):
            loss = None
        self._pass_loss = loss
        return self._backward(loss, step, record, wanted, after)

    def _backward(self, loss: torch.Tensor | None, step: int, record: BatchRecord,
                  wanted: torch.Tensor | None = None, after: torch.Tensor | None = None) -> bool | torch.Tensor:
        """Back-propagate ``loss``; False (update skipped and undone) for None, a non-finite loss or gradient.

        The loss and the gradients are checked on the device in one pass over them. Where the skip is decided on
        the device the answer stays there: a device bool, joined with ``wanted`` (the method's own condition,
        :meth:`update_only_if`) and ``after`` (a first pass's answer), the non-finite pass counted as a device value
        (the update's skip is counted once, by :meth:`update`). Otherwise it is read back (one host synchronisation
        per pass) and a non-finite pass's gradients dropped."""
        if loss is not None:
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            bad = non_finite(loss.detach(), [p.grad for p in self.params_to_adapt() if p.grad is not None])
            if self.skips_on_device:
                done, counted = ~bad, bad
                for condition in (wanted, after):
                    if condition is not None:
                        done, counted = done & condition, counted & condition
                self.counters["nonfinite_losses"] += counted.long()
                return done
            if not bool(bad):
                return True
            self.counters["nonfinite_losses"] += 1
            log.warning("batch %d step %d: non-finite loss or gradient, update skipped", record.batch, step)
        record.skipped_updates += 1
        self.abandon_update()
        if self.optimizer is not None:
            self.optimizer.zero_grad(set_to_none=True)
        return False

    def test_step(self, batch: dict, batch_idx: int) -> None:
        """One batch of the stream. Lightning calls it under the run's autocast; only the encoders keep it
        (:meth:`encoder_autocast`): similarities, losses, memories and scores are float32, since bf16 cosines near
        0.3, divided by a temperature of 0.01, are logits on a grid 0.2 apart (docs/configuration.md)."""
        kind = self.gallery.device.type
        self._encoder_amp = (kind, torch.get_autocast_dtype(kind)) if torch.is_autocast_enabled(kind) else None
        try:
            with torch.autocast(kind, enabled=False):
                self._stream_batch(batch)
        finally:
            self._encoder_amp = None

    def _stream_batch(self, batch: dict) -> None:
        segment = int(batch.get("segment", 0))
        if segment != self._segment:
            self.begin_segment(segment)
        elif self.reset_policy == "episodic":
            self.reset()
        record = BatchRecord(batch=len(self.history), size=len(batch["index"]), segment=segment)
        start = time.perf_counter()
        self.record, self.batch_index = record, batch["index"]
        self.on_batch_start(batch, record)
        raw = self.adapt_batch(batch, record).float()
        with torch.no_grad():
            sims = self.refine_scores(raw)
            if self.posthoc is not None:
                sims = self.posthoc(sims)
        self.on_batch_end(record)
        self.record = self.batch_index = None
        record.adapt_s = time.perf_counter() - start
        self.counters["skipped_updates"] += record.skipped_updates
        self.kept.add(sims.detach(), raw.detach(), batch["index"], segment, self.refines)
        if self.gt is not None:  # on the device: the stream's loggers read it back when they write
            picked = sims.max(dim=1).indices  # the first maximum, as argmax, in about half its time on the CPU
            hit = self.is_relevant(picked, batch["index"]).sum()
            self.r1.add(hit, len(batch["index"]))
            record.running_r1 = 100.0 * self.r1.total / self.r1.count
        self.history.append(record)
        if record.losses:
            self.log("adapt/loss", self.last_update_loss(record), on_step=True, batch_size=record.size)
        if self.gt is not None:
            self.log("stream/R@1", record.running_r1, on_step=True, batch_size=record.size)

    def last_update_loss(self, record: BatchRecord) -> float | torch.Tensor:
        """The loss of the batch's last update that stepped (NaN if none did, where the skip is decided on the
        device: there a skipped update's place holds a NaN, which stays on the device)."""
        if not self.skips_on_device:
            return record.losses[-1]
        last = record.losses[0]
        for loss in record.losses[1:]:
            last = torch.where(loss.isnan(), last, loss)
        return last

    def on_test_end(self) -> None:
        self.settle_history()
        if self.skips_on_device and self.counters["nonfinite_losses"]:  # the host learns of them only now
            log.warning("non-finite loss or gradient: %d update(s) skipped", self.counters["nonfinite_losses"])

    def settle_history(self) -> None:
        """The stream's device values as numbers, read back together: the history's losses, running R@1 and
        per-step extras, and the counters (diagnostics kept as tensors, :mod:`tta.utils.device_values`)."""
        read_back(*(vars(r) for r in self.history), self.counters)
        for r in self.history:  # a skip decided on the device left a NaN in place of its update's loss
            r.losses = [x for x in r.losses if math.isfinite(x)]
        if torch.is_tensor(self.r1.total):
            self.r1.total = float(self.r1.total)

    def is_relevant(self, picked: torch.Tensor, queries: torch.Tensor | None) -> torch.Tensor | None:
        """Whether gallery item ``picked[i]`` is relevant to stream query ``queries[i]`` (diagnostics only);
        None when the runner gave no ground truth or the queries are unknown."""
        if self.gt is None or queries is None:
            return None
        gt, gallery_class = self._on_device(picked.device)
        want = gt[queries.to(picked.device)]
        if gallery_class is not None:
            picked = gallery_class[picked]
        return picked == want

    def _on_device(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The ground truth and gallery classes on ``device`` (copied once, not per batch)."""
        kept = getattr(self, "_labels_on", None)
        if kept is None or kept[0] != device or kept[1] is not self.gt:
            classes = self.gallery_class.to(device) if self.gallery_class is not None else None
            kept = self._labels_on = (device, self.gt, self.gt.to(device), classes)
        return kept[2], kept[3]

    @property
    def refines(self) -> bool:
        """Whether scored rows differ from the raw similarities (a :meth:`refine_scores` override or a refiner)."""
        return type(self).refine_scores is not OnlineAdapter.refine_scores or self.posthoc is not None

    @property
    def rows(self) -> list[torch.Tensor]:
        """The kept dense rows of the scored batches (:class:`KeptScores`)."""
        return self.kept.rows

    def scores(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(Q, G) scored rows in stream order and their (Q,) query indices (:meth:`KeptScores.dense`)."""
        return self.kept.dense()

    def raw_scores(self) -> torch.Tensor | None:
        """(Q, G) rows before refinement, in stream order; None for a method that does not refine."""
        return self.kept.raw_dense()
