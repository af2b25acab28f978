"""The streaming accumulator (tta.metrics.streaming.StreamScores) gives exactly what the dense functions give on the
whole score matrix: ranks (ties included), failed rows, hubness at every k, k-occurrence, collapse; in 1:1 and
multi-caption layouts, batch by batch, and merged across two accumulators as two processes would be."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from tta.data.layout import EvalLayout
from tta.data.readers.msrvtt import VideoTextPair
from tta.metrics import k_occurrence, occurrence_from_neighbours, stable_topk_indices, stable_topk_mask
from tta.metrics.hubness import top_values
from tta.metrics.retrieval import _ranks_and_ties, finite_rows, ranks_by_row
from tta.metrics.streaming import StreamScores
from tta.results import collapse_check, segment_metrics, segment_summary, top1_collapse


def _cfg(k: int = 10):
    return OmegaConf.create({"hubness": {"k": k}, "metrics": {"median": "lower"}})


def _one_to_one(n: int) -> EvalLayout:
    return EvalLayout(list(range(n)), list(range(n)), torch.arange(n), None, list(range(n)))


def _wrapped(q: int, g: int) -> EvalLayout:
    """Q queries over a smaller gallery: query i's relevant item is i mod G."""
    return EvalLayout(list(range(q)), list(range(g)), torch.arange(q) % g, None, list(range(q)))


def _tied(q: int, g: int, seed: int, levels: int = 4) -> torch.Tensor:
    """Scores drawn from a few levels: most rows tie at their ground truth and at their k-th neighbour."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, levels, (q, g), generator=gen).float() / levels


def _stream(sims: torch.Tensor, layout: EvalLayout, batch: int = 7, k: int = 15, segment: int = 0,
            sync_free: bool | None = None) -> StreamScores:
    acc = StreamScores(layout.gt, sims.shape[1], layout.gallery_class, k, sync_free)
    for start in range(0, sims.shape[0], batch):
        acc.update(sims[start:start + batch], torch.arange(start, min(start + batch, sims.shape[0])), segment)
    return acc


def _assert_same(dense: dict, streamed: dict) -> None:
    assert torch.equal(dense["ranks"], streamed["ranks"])
    assert dense["retrieval"] == streamed["retrieval"]
    assert dense["failed_rows"] == streamed["failed_rows"]
    assert dense["hubness_by_k"].keys() == streamed["hubness_by_k"].keys()
    for k, stats in dense["hubness_by_k"].items():  # identical floats, NaN where the dense statistic is NaN
        for key, value in stats.items():
            got = streamed["hubness_by_k"][k][key]
            assert got == value or (value != value and got != got), (k, key, value, got)
    assert str(dense["hubness"]) == str(streamed["hubness"])


@pytest.mark.parametrize("scores", ["random", "ties"])
def test_streamed_segment_equals_the_dense_reference(scores):
    q, g = 45, 30
    sims = torch.randn(q, g, generator=torch.Generator().manual_seed(0)) if scores == "random" else _tied(q, g, 1)
    layout = _wrapped(q, g)
    rows = _stream(sims, layout).compute()
    _assert_same(segment_metrics(sims, layout, torch.ones(q, dtype=torch.bool), _cfg()),
                 segment_summary(rows, g, _cfg()))
    if scores == "ties":  # the case that decides the tie convention: most ground truths share their score
        assert (sims == sims.gather(1, layout.gt[:, None])).sum() > 2 * q


def test_neighbour_lists_are_the_stable_order_at_every_k():
    sims = _tied(20, 12, 3, levels=3)
    lists = stable_topk_indices(sims, 12)
    full = torch.stack([torch.tensor(sorted(range(12), key=lambda j, r=r: (-float(r[j]), j))) for r in sims])
    assert torch.equal(lists, full)  # the whole stable descending order, ties to the lower index
    for k in range(1, 13):
        assert torch.equal(stable_topk_indices(sims, k), full[:, :k])  # k < G: ties at the k-th score left out
        assert torch.equal(occurrence_from_neighbours(lists, 12, k), k_occurrence(sims, k))
        member = torch.zeros_like(sims, dtype=torch.bool).scatter_(1, lists[:, :k], True)
        assert torch.equal(member, stable_topk_mask(sims, k))


@pytest.mark.parametrize("scores", ["random", "ties"])
def test_row_by_row_ranks_equal_the_chunked_count(scores):
    # the streamed batches are counted row by row; the chunked count is the definition's direct transcription
    q, g = 40, 33
    sims = torch.randn(q, g, generator=torch.Generator().manual_seed(5)) if scores == "random" else _tied(q, g, 6)
    gt = torch.randint(0, g, (q,), generator=torch.Generator().manual_seed(7))
    gt[:3] = torch.tensor([0, g - 1, g // 2])
    assert torch.equal(ranks_by_row(sims, gt), _ranks_and_ties(sims, gt)[0])


def test_finite_rows_checks_entries_where_a_sum_is_not_finite():
    sims = torch.zeros(5, 6)
    sims[1] = 3e38  # finite scores whose float32 sum overflows
    sims[2, 3], sims[3, 0], sims[4, 5] = float("nan"), float("inf"), -float("inf")
    assert finite_rows(sims).tolist() == [True, True, False, False, False]
    assert torch.equal(finite_rows(sims), torch.isfinite(sims).all(dim=1))


def test_failed_rows_are_misses_and_left_out_of_hubness():
    sims = torch.randn(24, 24, generator=torch.Generator().manual_seed(4))
    sims[[2, 9, 10]] = float("nan")
    sims[17, 5] = float("inf")
    layout = _one_to_one(24)
    finite = torch.isfinite(sims).all(dim=1)
    rows = _stream(sims, layout, batch=5).compute()
    assert torch.equal(rows["finite"], finite) and (rows["neighbours"][~finite] == -1).all()
    streamed = segment_summary(rows, 24, _cfg(2))
    _assert_same(segment_metrics(sims, layout, finite, _cfg(2)), streamed)
    assert streamed["failed_rows"] == 4 and streamed["ranks"][[2, 9, 10, 17]].tolist() == [24] * 4


def test_every_row_failed():
    sims = torch.full((6, 8), float("nan"))
    layout = EvalLayout(list(range(6)), list(range(8)), torch.arange(6), None, list(range(6)))
    rows = _stream(sims, layout, batch=4).compute()
    _assert_same(segment_metrics(sims, layout, torch.zeros(6, dtype=torch.bool), _cfg(2)),
                 segment_summary(rows, 8, _cfg(2)))
    assert top1_collapse(rows["neighbours"][rows["finite"], 0], 8) == collapse_check(sims[rows["finite"]])


@pytest.mark.parametrize(("q", "g", "k", "scores"), [(45, 30, 15, "ties"), (45, 30, 15, "random"),
                                                     (20, 12, 15, "ties"), (33, 200, 10, "ties")])
def test_the_sync_free_rows_equal_the_case_by_case_rows(q, g, k, scores):
    """The GPU's path (every row counted and sorted, nothing read back) gives the CPU path's rows bit for bit: ties
    at the ground truth and at the k-th neighbour, NaN and infinite rows, -0.0 beside 0.0, k above G."""
    sims = _tied(q, g, seed=q + g) - 0.5 if scores == "ties" else torch.randn(q, g, generator=torch.Generator().manual_seed(1))
    sims[[2, 7]] = float("nan")
    sims[11, 3], sims[12, 0] = float("inf"), float("-inf")
    sims[13] = torch.where(sims[13] == 0, torch.tensor(-0.0), sims[13])
    layout = _wrapped(q, g)
    want = _stream(sims, layout, batch=5, k=k, sync_free=False).compute()
    got = _stream(sims, layout, batch=5, k=k, sync_free=True).compute()
    assert want.keys() == got.keys() and all(torch.equal(want[name], got[name]) for name in want)
    assert not got["finite"][[2, 7, 11, 12]].any() and got["finite"].sum() == q - 4


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("where", ["cuda", "cpu"])
@pytest.mark.parametrize("multi", [False, True])
def test_cuda_rows_stream_as_cpu_rows_with_failures(where, multi):
    """Score rows on the GPU, the accumulator on the GPU or left on the CPU: the same rows as an all-CPU stream,
    failed rows included (a diverged method is scored on every query, on either device)."""
    layout = EvalLayout.build(PAIRS, "t2v", multi=True) if multi else _one_to_one(24)
    q, g = len(layout.queries), len(layout.gallery)
    sims = torch.randn(q, g, generator=torch.Generator().manual_seed(4))
    sims[[1, 3]] = float("nan")
    want = _stream(sims, layout, batch=3).compute()
    acc = StreamScores(layout.gt, g, layout.gallery_class, 15).to(where)
    for start in range(0, q, 3):
        acc.update(sims[start:start + 3].cuda(), torch.arange(start, min(start + 3, q)))
    got = acc.compute()
    assert want.keys() == got.keys() and all(torch.equal(want[k], got[k]) for k in want)


PAIRS = [VideoTextPair("a", "a one", "c0"), VideoTextPair("b", "b one", "c1"), VideoTextPair("a", "a two", "c2"),
         VideoTextPair("c", "c one", "c3"), VideoTextPair("b", "b two", "c4"), VideoTextPair("a", "a three", "c5"),
         VideoTextPair("d", "d one", "c6"), VideoTextPair("c", "c two", "c7")]


@pytest.mark.parametrize("task", ["v2t", "t2v"])
@pytest.mark.parametrize("scores", ["random", "ties"])
def test_multi_caption_layouts_keep_their_relevance(task, scores):
    layout = EvalLayout.build(PAIRS, task, multi=True)
    q, g = len(layout.queries), len(layout.gallery)
    sims = torch.randn(q, g, generator=torch.Generator().manual_seed(5)) if scores == "random" else _tied(q, g, 6, 2)
    sims[1, 0] = float("nan")
    finite = torch.isfinite(sims).all(dim=1)
    rows = _stream(sims, layout, batch=3, k=g).compute()
    _assert_same(segment_metrics(sims, layout, finite, _cfg(2)), segment_summary(rows, g, _cfg(2)))


def test_two_merged_accumulators_equal_one_over_the_whole_stream():
    """Two processes each score every other batch of two segments; merged, the rows come back in stream order."""
    q, g = 40, 25
    gen = torch.Generator().manual_seed(7)
    segments = [torch.randn(q, g, generator=gen), _tied(q, g, 8)]
    segments[1][3] = float("nan")
    layout = _wrapped(q, g)
    one, first, second = (StreamScores(layout.gt, g, None, 15) for _ in range(3))
    for s, sims in enumerate(segments):
        for b, start in enumerate(range(0, q, 6)):
            index = torch.arange(start, min(start + 6, q))
            one.update(sims[index], index, s)
            (first if b % 2 == 0 else second).update(sims[index], index, s)
    first.merge_state(second)
    merged, whole = first.compute(), one.compute()
    assert all(torch.equal(merged[key], whole[key]) for key in whole)
    assert merged["index"].tolist() == list(range(q)) * 2 and merged["segment"].tolist() == [0] * q + [1] * q
    for s, sims in enumerate(segments):
        part = {key: value[merged["segment"] == s] for key, value in merged.items()}
        finite = torch.isfinite(sims).all(dim=1)
        _assert_same(segment_metrics(sims, layout, finite, _cfg()), segment_summary(part, g, _cfg()))


def test_collapse_and_running_occurrence_from_neighbours():
    sims = torch.randn(30, 20, generator=torch.Generator().manual_seed(9))
    sims[:20, 4] = 10.0  # item 4 is everyone's top-1 for two thirds of the queries
    acc = _stream(sims, _wrapped(30, 20))
    rows = acc.compute()
    assert top1_collapse(rows["neighbours"][:, 0], 20) == collapse_check(sims)
    assert collapse_check(sims)["collapsed"] is True
    assert torch.equal(acc.occurrence(10), k_occurrence(sims, 10))


def test_a_row_of_the_wrong_width_is_refused():
    acc = StreamScores(torch.arange(4), 8)
    with pytest.raises(ValueError, match="8"):
        acc.update(torch.zeros(2, 7), torch.arange(2))


@pytest.mark.parametrize("scores", ["random", "ties", "infinite"])
def test_blocked_top_values_equal_topk(scores):
    # rows long enough for the block prefilter (block 16, 300 blocks, and a partial block at the end)
    gen = torch.Generator().manual_seed(8)
    rows = torch.randn(6, 4805, generator=gen) if scores != "ties" else _tied(6, 4805, 9, levels=50)
    if scores == "infinite":
        rows[0, :4000] = -float("inf")
        rows[1, 4803] = float("inf")
    for n in (1, 5, 16, 33):
        values, indices = top_values(rows, n, block=16)
        want = torch.topk(rows, n, dim=1)
        assert torch.equal(values, want.values) and torch.equal(rows.gather(1, indices), values)
        assert all(len(set(r.tolist())) == n for r in indices)
