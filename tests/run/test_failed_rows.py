"""A method's failure never improves its score: diverged rows are misses, a non-finite update is skipped, and the
per-query outcome (ranks, failures, ranks before refinement) is kept for paired comparisons."""

from __future__ import annotations

import numpy as np
import torch
from omegaconf import OmegaConf

from tests.fixtures import build_fast_env, make_fast_adapter, stream
from tta.data.layout import EvalLayout
from tta.metrics import gt_ranks, hubness_from_occurrence, k_occurrence, metrics_from_ranks
from tta.results import ScoredRows, read_query_ranks, segment_metrics, write_query_ranks


def _cfg(k: int = 2):
    return OmegaConf.create({"hubness": {"k": k}, "metrics": {"median": "lower"}})


def _layout(n: int) -> EvalLayout:
    return EvalLayout(list(range(n)), list(range(n)), torch.arange(n), None, list(range(n)))


def test_an_adapter_that_diverges_part_way_is_scored_on_every_query():
    env = build_fast_env("meanp", "v2t", batch_sizes=(4, 4), n=8)
    adapter = make_fast_adapter(env, "tent")
    original = adapter.forward_queries

    def diverge_on_second_batch(batch):  # the adapted encoder blows up from the second batch on
        fw = original(batch)
        if int(batch["index"][0]) >= 4:
            fw.sims = fw.sims * float("nan")
        return fw

    adapter.forward_queries = diverge_on_second_batch
    sims = stream(adapter, env.batches)
    finite = torch.isfinite(sims).all(dim=1)
    assert finite.tolist() == [True] * 4 + [False] * 4
    out = segment_metrics(sims, _layout(8), finite, _cfg())
    assert out["failed_rows"] == 4
    assert out["ranks"][4:].tolist() == [8] * 4  # misses at the worst rank G
    first_half = gt_ranks(sims[:4], torch.arange(4))
    assert out["ranks"][:4].tolist() == first_half.tolist()
    # R@1 over all 8 queries: the failed half can only lower it; dropping them would have doubled it
    hits = int((first_half == 1).sum())
    assert out["retrieval"]["R@1"] == 100.0 * hits / 8
    assert out["retrieval"]["R@1"] == metrics_from_ranks(out["ranks"])["R@1"]
    # hubness has no neighbour list for a failed row: it is over the finite rows only
    expect = hubness_from_occurrence(k_occurrence(sims[:4], 2), 2, num_queries=4)
    assert out["hubness_by_k"]["2"]["num_hubs"] == expect["num_hubs"]
    assert out["hubness_by_k"]["2"]["gini"] == expect["gini"]


def test_every_row_failed_is_scored_not_raised():
    sims = torch.full((4, 4), float("nan"))
    out = segment_metrics(sims, _layout(4), torch.zeros(4, dtype=torch.bool), _cfg())
    assert out["retrieval"]["R@1"] == 0.0 and out["retrieval"]["MnR"] == 4.0 and out["failed_rows"] == 4
    assert out["hubness"]["skewness"] is None and out["hubness_by_k"] == {}


def test_sar_with_a_non_finite_second_pass_keeps_its_parameters_finite():
    env = build_fast_env("meanp", "v2t", batch_sizes=(4, 4), n=8)
    adapter = make_fast_adapter(env, "sar", "adapter.method.margin_scale=2.0")  # E0 = 2 ln G: S1 and S2 all queries
    original = adapter.second_pass

    def poisoned(batch, step):  # the SAM ascent happens, then the perturbed loss is NaN
        original(batch, step)
        return sum(p.sum() for p in adapter.params_to_adapt()) * float("nan")

    adapter.second_pass = poisoned
    before = [p.detach().clone() for p in adapter.params_to_adapt()]
    stream(adapter, env.batches)
    assert adapter.counters["updates"] == 0 and adapter.counters["nonfinite_losses"] > 0
    after = adapter.params_to_adapt()
    assert all(torch.isfinite(p).all() for p in after)
    assert all(torch.equal(a, b) for a, b in zip(after, before, strict=True))  # the ascent was undone
    assert all(torch.isfinite(r).all() for r in adapter.rows)


def test_refining_methods_keep_their_raw_scores_and_others_do_not():
    env = build_fast_env("meanp", "v2t", batch_sizes=(4, 4), n=8)
    hsm = make_fast_adapter(env, "hsm")
    refined = stream(hsm, env.batches)
    raw = hsm.raw_scores()
    assert hsm.refines and raw is not None and raw.shape == refined.shape and not torch.equal(raw, refined)
    source = make_fast_adapter(env, "source")
    stream(source, env.batches)
    assert not source.refines and source.raw_scores() is None


def test_query_ranks_round_trip(tmp_path):
    ranks = torch.tensor([1, 3, 8, 2])
    scored = ScoredRows(torch.zeros(4, 8), ranks, torch.tensor([True, True, False, True]), ["a", "b", "c", "d"],
                        torch.zeros(4, dtype=torch.long), raw_ranks=torch.tensor([2, 3, 8, 1]))
    write_query_ranks(tmp_path / "query_ranks.npz", scored)
    got = read_query_ranks(tmp_path / "query_ranks.npz")
    assert got["query_id"].tolist() == ["a", "b", "c", "d"] and got["rank"].tolist() == [1, 3, 8, 2]
    assert got["failed"].tolist() == [False, False, True, False] and int(got["num_gallery"]) == 8
    assert got["rank_raw"].tolist() == [2, 3, 8, 1] and got["segment"].dtype == np.int16
