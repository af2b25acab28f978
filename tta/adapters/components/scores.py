"""What an adapter keeps of the scores it produces over a stream: every row's rank and top-k neighbours
(:class:`~tta.metrics.streaming.StreamScores`, refined and, for refining methods, raw), the dense rows only when a
run saves them (``save.sims``), and the first N x N block for the report's heatmap (HAT-VTR Fig. 9)."""

from __future__ import annotations

import torch

from tta.metrics.streaming import StreamScores


class KeptScores:
    """The scoring record of one adapter's stream (the results read it; the resume checkpoint saves it)."""

    #: the attributes a resume checkpoint saves (tta/adapters/components/resume.py)
    state_keys = ("rows", "raw_rows", "indices", "scored", "scored_raw", "head_rows")

    def __init__(self) -> None:
        self.scored: StreamScores | None = None
        self.scored_raw: StreamScores | None = None
        self.keep_rows = True  # the dense rows and their stream indices are kept (save.sims)
        self.rows: list[torch.Tensor] = []
        self.raw_rows: list[torch.Tensor] = []
        self.indices: list[torch.Tensor] = []
        self.head_size = 0
        self.head_rows: list[torch.Tensor] = []

    def track(self, gt: torch.Tensor, num_gallery: int, gallery_class: torch.Tensor | None, k: int,
              keep_rows: bool = True, head: int = 0) -> None:
        """Start accumulating: ranks against ``gt`` (Q,) and top-``k`` neighbour lists over ``num_gallery`` items."""
        self.scored = StreamScores(gt, num_gallery, gallery_class, k)
        self.scored_raw = StreamScores(gt, num_gallery, gallery_class, k)
        self.keep_rows, self.head_size = bool(keep_rows), int(head)

    def add(self, sims: torch.Tensor, raw: torch.Tensor, index: torch.Tensor, segment: int, refines: bool) -> None:
        """One scored batch: ``sims`` (B, G) as refined, ``raw`` (B, G) before refinement, ``index`` (B,)."""
        if self.scored is not None:
            self.scored.update(sims, index, segment)
            if refines:
                self.scored_raw.update(raw, index, segment)
        if self.keep_rows:
            self.rows.append(sims.cpu())
            self.indices.append(index.detach().cpu())
            if refines:
                self.raw_rows.append(raw.cpu())
        missing = self.head_size - sum(len(r) for r in self.head_rows)
        if missing > 0:  # the report's heatmap needs actual scores, not ranks; read back with the results
            self.head_rows.append(sims[:missing, :self.head_size].clone())

    def to(self, device: torch.device) -> None:
        """The accumulators on ``device`` (a checkpoint is unpickled on the CPU)."""
        for accumulator in (self.scored, self.scored_raw):
            if accumulator is not None:
                accumulator.to(device)

    def head_block(self) -> torch.Tensor | None:
        """The first ``head`` x ``head`` block of the scores (rows in stream order), or None when not kept."""
        return torch.cat([r.cpu() for r in self.head_rows]) if self.head_rows else None

    def dense(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(Q, G) scored rows in stream order and the (Q,) query indices they belong to (kept while ``keep_rows``)."""
        if not self.rows:
            raise RuntimeError("no scored rows are kept: no batch was scored, or track_scores(keep_rows=False)")
        return torch.cat(self.rows), torch.cat(self.indices)

    def raw_dense(self) -> torch.Tensor | None:
        """(Q, G) rows before refinement, in stream order; None for a method that does not refine."""
        return torch.cat(self.raw_rows) if self.raw_rows else None
