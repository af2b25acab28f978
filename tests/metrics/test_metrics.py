"""Tests for tta.metrics against spec/metrics.md worked examples and a NumPy brute force."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats
import torch

from tta.metrics import (
    absolute_robustness,
    count_gt_ties,
    gt_ranks,
    gt_ranks_multi,
    hubness_from_occurrence,
    hubness_metrics,
    k_occurrence,
    metrics_from_ranks,
    mmi,
    relative_robustness,
    retrieval_metrics,
    rsum,
)

RETRIEVAL_KEYS = {"R@1", "R@5", "R@10", "R@50", "MdR", "MnR"}
HUBNESS_KEYS = {"skewness", "trunc_skewness", "atkinson", "robin_hood", "antihub", "hub_occurrence"}


# ----------------------------------------------------------------------------- brute force
def _bf_order(row: np.ndarray) -> np.ndarray:
    """Stable descending order: ties keep increasing gallery index."""
    return np.argsort(-row, kind="stable")


def _bf_ranks(sims: np.ndarray, gt: np.ndarray) -> np.ndarray:
    ranks = np.empty(len(gt), dtype=np.int64)
    for i in range(sims.shape[0]):
        ranks[i] = int(np.nonzero(_bf_order(sims[i]) == gt[i])[0][0]) + 1
    return ranks


def _bf_retrieval(sims: np.ndarray, gt: np.ndarray, median: str) -> dict[str, float]:
    ranks = _bf_ranks(sims, gt)
    out = {f"R@{k}": 100.0 * np.sum(ranks <= k) / len(ranks) for k in (1, 5, 10, 50)}
    if median == "lower":
        out["MdR"] = float(np.sort(ranks)[(len(ranks) + 1) // 2 - 1])
    else:
        out["MdR"] = float(np.median(ranks))
    out["MnR"] = float(np.mean(ranks))
    return out


def _bf_occurrence(sims: np.ndarray, k: int) -> np.ndarray:
    counts = np.zeros(sims.shape[1], dtype=np.int64)
    for i in range(sims.shape[0]):
        for j in _bf_order(sims[i])[:k]:
            counts[j] += 1
    return counts


def _bf_hubness(n: np.ndarray, k: int, q: int) -> dict[str, float]:
    n = n.astype(np.float64)
    g = len(n)
    mu = q * k / g
    s = np.std(n, ddof=1)
    a = -mu / s
    trunc_mean3 = scipy.stats.truncnorm(a, np.inf).moment(3)  # third raw moment on [a, inf)
    gini = sum(abs(x - y) for x in n for y in n) / (2 * g * n.sum())
    return {
        "skewness": scipy.stats.skew(n, bias=True),
        "trunc_skewness": trunc_mean3,
        "atkinson": 1 - (np.mean(np.sqrt(n))) ** 2 / mu,
        "robin_hood": 0.5 * np.abs(n - mu).sum() / n.sum(),
        "antihub": np.mean(n == 0),
        "hub_occurrence": n[n >= 2 * k].sum() / (k * q),
        "gini": gini,
        "groupie": n.max() / (k * q),
    }


def _random_sims(q: int, g: int, seed: int, decimals: int | None = None) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    sims = torch.randn(q, g, generator=gen, dtype=torch.float64)
    if decimals is not None:
        sims = torch.round(sims * 10**decimals) / 10**decimals
    return sims.float()


def _random_gt(q: int, g: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed + 1)
    return torch.randint(0, g, (q,), generator=gen)


# ----------------------------------------------------------------------------- retrieval
def test_ranks_hand_case_ties_go_to_lower_index() -> None:
    sims = torch.tensor([[0.5, 0.9, 0.9, 0.1], [0.5, 0.9, 0.9, 0.1], [0.3, 0.3, 0.3, 0.3]])
    gt = torch.tensor([2, 1, 3])
    assert gt_ranks(sims, gt).tolist() == [2, 1, 4]
    assert count_gt_ties(sims, gt) == 3
    assert count_gt_ties(sims, torch.tensor([0, 3, 0])) == 1


@pytest.mark.parametrize(
    ("q", "g", "decimals", "median"),
    [
        (60, 60, None, "lower"),
        (60, 60, 1, "lower"),
        (40, 97, 0, "mean_of_middle"),
        (120, 30, 1, "mean_of_middle"),
        (2100, 70, 1, "lower"),  # spans several row chunks
    ],
)
def test_retrieval_matches_bruteforce(q: int, g: int, decimals: int | None, median: str) -> None:
    sims = _random_sims(q, g, seed=q + g, decimals=decimals)
    gt = _random_gt(q, g, seed=q + g)
    ranks = gt_ranks(sims, gt)
    bf_ranks = _bf_ranks(sims.numpy(), gt.numpy())
    np.testing.assert_array_equal(ranks.numpy(), bf_ranks)
    got = retrieval_metrics(sims, gt, median=median)
    assert set(got) == RETRIEVAL_KEYS
    assert all(isinstance(v, float) for v in got.values())
    expected = _bf_retrieval(sims.numpy(), gt.numpy(), median)
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, abs=1e-9), key
    if decimals is not None:  # rounded scores really produce ties with the ground truth
        bf_ties = sum(int(np.sum(sims.numpy()[i] == sims.numpy()[i, gt[i]]) > 1) for i in range(q))
        assert bf_ties > 0
        assert count_gt_ties(sims, gt) == bf_ties


def test_perfect_retrieval() -> None:
    sims = torch.eye(7) + 0.01 * torch.arange(7.0)
    got = retrieval_metrics(sims, torch.arange(7))
    assert got == {"R@1": 100.0, "R@5": 100.0, "R@10": 100.0, "R@50": 100.0, "MdR": 1.0, "MnR": 1.0}
    assert rsum(got) == 300.0


def test_median_conventions_differ_for_even_q() -> None:
    ranks = torch.tensor([10, 1, 3, 2])
    assert metrics_from_ranks(ranks, "lower")["MdR"] == 2.0  # torch.median convention
    assert metrics_from_ranks(ranks, "mean_of_middle")["MdR"] == 2.5  # numpy convention
    assert float(torch.median(ranks.float())) == 2.0
    assert float(np.median(ranks.numpy())) == 2.5
    # same ranks produced through a score matrix: row i puts its gt at the requested rank
    g = 12
    sims = torch.zeros(4, g)
    sims[:, :] = -torch.arange(g, dtype=torch.float32)  # item j has rank j + 1
    gt = ranks - 1
    assert retrieval_metrics(sims, gt)["MdR"] == 2.0
    assert retrieval_metrics(sims, gt, median="mean_of_middle")["MdR"] == 2.5
    assert retrieval_metrics(sims, gt)["MnR"] == 4.0
    assert retrieval_metrics(sims, gt)["R@1"] == 25.0
    assert retrieval_metrics(sims, gt)["R@5"] == 75.0


def test_odd_q_median_conventions_agree() -> None:
    ranks = torch.tensor([5, 1, 9])
    assert metrics_from_ranks(ranks, "lower")["MdR"] == metrics_from_ranks(ranks, "mean_of_middle")[
        "MdR"
    ] == 5.0


def test_rsum() -> None:
    assert rsum({"R@1": 20.0, "R@5": 45.5, "R@10": 60.0, "R@50": 90.0}) == pytest.approx(125.5)


@pytest.mark.parametrize("decimals", [None, 0])
def test_gt_ranks_multi_matches_bruteforce(decimals: int | None) -> None:
    q, g = 50, 40
    sims = _random_sims(q, g, seed=3, decimals=decimals)
    gen = torch.Generator().manual_seed(5)
    mask = torch.rand(q, g, generator=gen) < 0.08
    mask[torch.arange(q), torch.randint(0, g, (q,), generator=gen)] = True
    got = gt_ranks_multi(sims, mask).numpy()
    s, m = sims.numpy(), mask.numpy()
    expected = [int(np.nonzero(m[i][_bf_order(s[i])])[0][0]) + 1 for i in range(q)]
    np.testing.assert_array_equal(got, expected)
    # single relevant item reduces to gt_ranks
    gt = _random_gt(q, g, seed=3)
    one = torch.zeros(q, g, dtype=torch.bool)
    one[torch.arange(q), gt] = True
    assert torch.equal(gt_ranks_multi(sims, one), gt_ranks(sims, gt))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (runs on GPU machines)")
def test_retrieval_and_hubness_on_cuda_match_cpu() -> None:
    sims = _random_sims(300, 200, seed=11, decimals=1)
    gt = _random_gt(300, 200, seed=11)
    assert retrieval_metrics(sims.cuda(), gt.cuda()) == retrieval_metrics(sims, gt)
    assert torch.equal(k_occurrence(sims.cuda(), 10), k_occurrence(sims, 10))
    from tta.metrics.consistency import top_answers

    sims[3, 5] = float("nan")  # a failed row keeps its -1 answers on either device
    assert torch.equal(top_answers(sims.cuda(), 10), top_answers(sims, 10))


def test_retrieval_errors() -> None:
    sims = torch.randn(4, 6)
    gt = torch.tensor([0, 1, 2, 3])
    with pytest.raises(ValueError, match="2-D"):
        retrieval_metrics(torch.randn(6), gt)
    with pytest.raises(ValueError, match=r"gt must have shape \(Q,\)"):
        retrieval_metrics(sims, torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="out of range"):
        retrieval_metrics(sims, torch.tensor([0, 1, 2, 6]))
    with pytest.raises(ValueError, match="out of range"):
        gt_ranks(sims, torch.tensor([0, -1, 2, 3]))
    with pytest.raises(ValueError, match="integer"):
        retrieval_metrics(sims, gt.float())
    bad = sims.clone()
    bad[1, 2] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        retrieval_metrics(bad, gt)
    with pytest.raises(ValueError, match="no queries"):
        retrieval_metrics(torch.empty(0, 6), torch.empty(0, dtype=torch.long))
    with pytest.raises(ValueError, match="median must be one of"):
        retrieval_metrics(sims, gt, median="upper")
    with pytest.raises(ValueError, match="at least one relevant"):
        gt_ranks_multi(sims, torch.zeros(4, 6, dtype=torch.bool))
    with pytest.raises(ValueError, match="same shape"):
        gt_ranks_multi(sims, torch.ones(4, 5, dtype=torch.bool))


# ----------------------------------------------------------------------------- hubness
def test_hubness_worked_example() -> None:
    n = torch.tensor([0, 0, 1, 2, 5, 12, 0, 3, 7, 0])
    got = hubness_from_occurrence(n, k=2, num_queries=15)
    expected = {
        "skewness": 1.2783,
        "trunc_skewness": 0.9949,
        "atkinson": 0.4798,
        "robin_hood": 0.5,
        "antihub": 0.4,
        "hub_occurrence": 0.8,
        "gini": 0.64,
        "groupie": 0.4,
    }
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, abs=5e-5), key
    assert got["num_hubs"] == 3
    assert got["k"] == 2
    # independent cross-check of every value at full precision
    bf = _bf_hubness(n.numpy(), k=2, q=15)
    for key, value in bf.items():
        assert got[key] == pytest.approx(value, rel=1e-9), key


def test_trunc_skewness_upper_bound_and_nan_cases() -> None:
    # a -> 0 limit is 4/sqrt(2*pi); a very uneven occurrence approaches it from below
    n = np.zeros(1000, dtype=np.int64)
    n[0] = 1000
    got = hubness_from_occurrence(n, k=1, num_queries=1000)
    assert got["trunc_skewness"] < 4 / math.sqrt(2 * math.pi)
    assert got["trunc_skewness"] > 1.5
    assert got["antihub"] == pytest.approx(0.999)
    assert got["hub_occurrence"] == 1.0
    flat = hubness_from_occurrence(np.full(5, 4), k=2, num_queries=10)
    assert math.isnan(flat["skewness"]) and math.isnan(flat["trunc_skewness"])
    assert flat["atkinson"] == pytest.approx(0.0, abs=1e-12)
    assert flat["robin_hood"] == 0.0 and flat["gini"] == 0.0 and flat["antihub"] == 0.0


@pytest.mark.parametrize(
    ("q", "g", "k", "decimals"),
    [(80, 80, 10, None), (80, 80, 5, 0), (50, 200, 10, 1), (300, 40, 15, 1), (30, 25, 1, 0)],
)
def test_hubness_matches_bruteforce(q: int, g: int, k: int, decimals: int | None) -> None:
    sims = _random_sims(q, g, seed=7 * q + g, decimals=decimals)
    occ = k_occurrence(sims, k)
    bf_occ = _bf_occurrence(sims.numpy(), k)
    np.testing.assert_array_equal(occ.numpy(), bf_occ)
    assert int(occ.sum()) == q * k
    got = hubness_metrics(sims, k=k)
    assert set(got) == HUBNESS_KEYS
    assert all(isinstance(v, float) for v in got.values())
    bf = _bf_hubness(bf_occ, k, q)
    for key in HUBNESS_KEYS:
        assert got[key] == pytest.approx(bf[key], rel=1e-9, abs=1e-12), key
    assert got["skewness"] == pytest.approx(scipy.stats.skew(bf_occ.astype(float), bias=True))
    full = hubness_from_occurrence(occ, k, q)
    assert full["gini"] == pytest.approx(bf["gini"], rel=1e-9)
    assert full["groupie"] == pytest.approx(bf["groupie"], rel=1e-12)


def test_k_occurrence_ties_go_to_lower_index() -> None:
    sims = torch.full((6, 5), 0.25)
    np.testing.assert_array_equal(k_occurrence(sims, 2).numpy(), [6, 6, 0, 0, 0])
    sims = torch.tensor([[0.1, 0.7, 0.7, 0.7, 0.9], [0.7, 0.7, 0.2, 0.7, 0.1]])
    # row 0 top-2 = {4, 1}; row 1 top-2 = {0, 1}
    np.testing.assert_array_equal(k_occurrence(sims, 2).numpy(), [1, 2, 0, 0, 1])
    # k == G selects everything
    np.testing.assert_array_equal(k_occurrence(sims, 5).numpy(), [2, 2, 2, 2, 2])


def test_the_device_occurrence_and_skewness_are_the_host_metrics_and_rank_nan_last() -> None:
    """What a stream keeps on its device (HSM banks' running counts, the guards' skewness) equals the reported
    metrics: the counts exactly, the skewness to rounding (another summation order); a NaN score is never a
    neighbour while finite ones are left, and a row still counts exactly k items."""
    from tta.metrics.hubness import k_occurrence_on_device, occurrence_skewness

    g = torch.Generator().manual_seed(0)
    for q, num_g, k in ((40, 30, 5), (7, 12, 1), (2500, 50, 10)):
        sims = torch.randn(q, num_g, generator=g)
        sims[:, :3] = sims[:, 3:4]  # ties
        occ = k_occurrence_on_device(sims, k)
        assert torch.equal(occ, k_occurrence(sims, k))
        host = hubness_from_occurrence(occ, k, q)["skewness"]
        assert float(occurrence_skewness(occ, k, q)) == pytest.approx(host, rel=1e-12)
    assert math.isnan(float(occurrence_skewness(torch.full((4,), 3), 2, 6)))  # all equal: NaN, as on the host
    sims = torch.tensor([[float("nan"), 0.1, 0.9, 0.5], [float("nan")] * 4])
    assert k_occurrence_on_device(sims, 2).tolist() == [1, 1, 1, 1]  # row 0: {2, 3}; row 1 (all NaN): {0, 1}


def test_hubness_errors() -> None:
    sims = torch.randn(5, 4)
    with pytest.raises(ValueError, match="exceeds the gallery size"):
        hubness_metrics(sims, k=5)
    with pytest.raises(ValueError, match="k must be >= 1"):
        k_occurrence(sims, 0)
    bad = sims.clone()
    bad[0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        hubness_metrics(bad, k=2)
    with pytest.raises(ValueError, match="2-D"):
        k_occurrence(torch.randn(4), 1)
    with pytest.raises(ValueError, match="does not equal k"):
        hubness_from_occurrence([1, 2, 3], k=2, num_queries=4)
    with pytest.raises(ValueError, match="non-negative"):
        hubness_from_occurrence([-1, 5], k=1, num_queries=4)


# ----------------------------------------------------------------------------- robustness
@pytest.mark.parametrize(
    ("perturbed", "gamma_a", "gamma_r", "mmi_value"),
    [(8.7, 0.662, 0.205, 0.795), (23.1, 0.806, 0.544, 0.456)],
)
def test_robustness_worked_example(
    perturbed: float, gamma_a: float, gamma_r: float, mmi_value: float
) -> None:
    clean = 42.5
    assert absolute_robustness(clean, perturbed) == pytest.approx(gamma_a, abs=5e-4)
    assert relative_robustness(clean, perturbed) == pytest.approx(gamma_r, abs=5e-4)
    assert mmi(clean, [perturbed]) == pytest.approx(mmi_value, abs=5e-4)
    assert mmi(clean, [perturbed]) == pytest.approx(1 - relative_robustness(clean, perturbed))


def test_robustness_properties() -> None:
    assert absolute_robustness(40.0, 40.0) == 1.0
    assert relative_robustness(40.0, 44.0) == pytest.approx(1.1)  # perturbation helped
    assert absolute_robustness(40.0, 44.0) > 1.0
    # averaging per-perturbation MMI equals MMI of the averaged score
    scores = [8.7, 23.1, 30.0]
    assert mmi(42.5, scores) == pytest.approx(np.mean([mmi(42.5, [s]) for s in scores]))
    assert math.isnan(relative_robustness(0.0, 5.0))
    assert math.isnan(mmi(0.0, [5.0]))
    with pytest.raises(ValueError, match="non-empty"):
        mmi(42.5, [])
