"""A query stream made of segments: one shift after another over the same queries (continual TTA).

HAT-VTR's protocol streams one shift per run and resets per shift (docs/methods/protocol.md, "Reset policies"); a
*stream scenario* presents the test queries once per shift, in sequence, to one adapter (``scenario=continual``).
The adapter sees a ``segment`` index in every batch and applies its reset policy at segment boundaries
(``per_shift`` resets, ``never`` carries everything over, ``episodic`` resets before every batch).

Batches never straddle two segments: every segment ends with its own partial batch, exactly as a single-shift run
of that segment would.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from torch.utils.data import Dataset, Sampler


class SegmentedStream(Dataset):
    """The concatenation of per-segment query datasets; each item gains its ``segment`` number.

    Args:
        segments: one dataset per shift, each returning dicts with at least ``index`` (the pair index).
    """

    def __init__(self, segments: Sequence[Dataset]):
        if not segments:
            raise ValueError("a stream needs at least one segment")
        self.segments = list(segments)
        self.lengths = [len(s) for s in self.segments]
        self.offsets = [sum(self.lengths[:i]) for i in range(len(self.lengths))]

    def __len__(self) -> int:
        return sum(self.lengths)

    def locate(self, i: int) -> tuple[int, int]:
        """(segment, position inside the segment) of global item ``i``."""
        if not 0 <= i < len(self):
            raise IndexError(f"item {i} outside a stream of {len(self)}")
        for seg in range(len(self.offsets) - 1, -1, -1):
            if i >= self.offsets[seg]:
                return seg, i - self.offsets[seg]
        raise IndexError(i)  # unreachable

    def __getitem__(self, i: int) -> dict:
        seg, j = self.locate(i)
        item = dict(self.segments[seg][j])
        item["segment"] = seg
        return item


class SegmentBatchSampler(Sampler[list[int]]):
    """Consecutive batches of ``batch_size`` inside each segment, the last partial batch of each segment kept.

    ``start_batch`` skips the first batches (a resumed run continues at the next unscored batch).
    """

    def __init__(self, lengths: Sequence[int], batch_size: int, start_batch: int = 0):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.lengths, self.batch_size, self.start_batch = list(lengths), int(batch_size), int(start_batch)

    def _all(self) -> Iterator[list[int]]:
        start = 0
        for n in self.lengths:
            for b in range(0, n, self.batch_size):
                yield list(range(start + b, start + min(n, b + self.batch_size)))
            start += n

    def __iter__(self) -> Iterator[list[int]]:
        for i, batch in enumerate(self._all()):
            if i >= self.start_batch:
                yield batch

    def __len__(self) -> int:
        return max(0, sum(-(-n // self.batch_size) for n in self.lengths) - self.start_batch)


class SegmentCollate:
    """Wraps an item collate function so that batches carry their (single) ``segment`` number."""

    def __init__(self, collate):
        self.collate = collate

    def __call__(self, items: list[dict]) -> dict:
        segments = {int(it.get("segment", 0)) for it in items}
        if len(segments) != 1:
            raise ValueError(f"a batch straddles stream segments {sorted(segments)}; use SegmentBatchSampler")
        out = self.collate(items)
        out["segment"] = segments.pop()
        return out
