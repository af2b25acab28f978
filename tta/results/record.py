"""The typed record of one run (``results.json``, every key described in docs/outputs.md) and the per-query outcome
of its stream (``query_ranks.npz``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

import torch


def optional(default: Any = None) -> Any:
    """A record field written to results.json only when set (absent rather than null when it does not apply)."""
    return field(default=default, metadata={"omit_unset": True})


@dataclass
class RunResults:
    """The record of one run, as written to ``results.json`` (in field order)."""

    task: str
    model: str
    adapter: str
    posthoc: str
    scenario: str
    train_data: str
    checkpoint: str
    shift: str
    severity: int
    data: str
    seed: int
    shift_seed: int
    shifted_side: str
    num_queries: int
    num_gallery: int
    num_pairs_read: int
    evaluation: dict
    skipped: dict
    input_notes: dict
    retrieval: dict
    hubness: dict
    median_convention: str
    counters: dict
    time_s: dict
    versions: dict
    config: dict
    collapse: dict = field(default_factory=dict)
    # what the shift did: its options (not for clean), the perturbed copy read, a mixed stream's per-item plan,
    # the donors of event insertion, what each shift's implementation is (faithful or an approximation)
    shift_options: dict | None = optional()
    perturbed_copy: dict | None = optional()
    shift_plan: dict | None = optional()
    donor_pool: dict | None = optional()
    shift_implementation: dict | list | None = optional()
    failed_rows: int = 0
    hubness_by_k: dict = field(default_factory=dict)
    cost: dict = field(default_factory=dict)
    # the shift's effect (tta/data/shift_effect.py)
    consistency: dict | None = optional()
    input_change: dict | None = optional()
    query_filter: dict | None = optional()
    gallery_shift: dict | None = optional()
    by_category: dict | None = optional()
    # refining methods: the metrics before refine_scores / posthoc
    retrieval_raw: dict | None = optional()
    hubness_raw: dict | None = optional()
    hubness_by_k_raw: dict | None = optional()
    # streams of several shifts
    reset_policy: str | None = optional()
    segments: list | None = optional()
    comp: dict | None = optional()  # the VideoComp probe after the stream (comp_probe.enabled)
    source_weights: str | None = None  # digest of the source model's weights (pairs runs in the report)
    provenance: dict = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for f in fields(self):
            if f.metadata.get("omit_unset") and out[f.name] is None:
                del out[f.name]
        return out


@dataclass
class ScoredRows:
    """Per-query outcome of one stream in stream order: ranks, failed rows, neighbour lists, and the scores
    themselves only when a run keeps them (``save.sims``)."""

    sims: torch.Tensor | None  # (R, G) scores (R = segments x Q), or None when the run did not keep them
    ranks: torch.Tensor  # (R,) 1-based rank of the relevant item; a failed row has the worst rank G
    finite: torch.Tensor  # (R,) False for a failed row (non-finite scores: the method diverged)
    query_ids: list[str]  # (R,) the id of each row's query (video id for v2t, caption id for t2v)
    segment: torch.Tensor  # (R,) the stream segment of each row
    raw_ranks: torch.Tensor | None = None  # (R,) ranks before refinement (refining methods only)
    neighbours: torch.Tensor | None = None  # (R, k) stable top-k gallery indices of each row (-1: failed row)
    num_gallery: int | None = None  # G (taken from ``sims`` when not given)
    head: torch.Tensor | None = None  # the first N x N block of the scores (save.sims_head), when kept

    def __post_init__(self):
        if self.num_gallery is None:
            self.num_gallery = int(self.sims.shape[1])
