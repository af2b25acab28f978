"""Intervals and tests for paired comparisons of runs over seeds and queries, and Holm's multiplicity correction
(docs/methods/metrics.md, "Comparisons").

The data of one comparison is D[s, q]: arm A's per-query hit minus arm B's, at seed s (both arms ran it, on the
same stream) and query q. Seeds and queries are crossed random factors, so the mean of D has the variance of a
two-way random-effects design without replication,

    Var(mean D) = sigma_seed^2 / S + sigma_query^2 / N + sigma_resid^2 / (S N).

The estimate is var(per-seed means) / S + var(per-query means) / N = (MS_seed + MS_query) / (S N), which counts
the residual twice (expectation sigma_seed^2 / S + sigma_query^2 / N + 2 sigma_resid^2 / (S N)): a little
conservative when the seeds agree, and never narrower than either factor alone. The interval is t-based with
Satterthwaite's degrees of freedom, which fall towards S - 1 when the seed variance dominates: with three seeds it
is then wide, as it must be. The p-value is the same t statistic's, so p < 0.05 exactly when the 95 % interval
excludes 0. Subtracting the residual (the unbiased ANOVA estimate) or a pre-test for a seed effect lose coverage with
three seeds, and a bootstrap of three seeds sees at most ten seed sets and shrinks their variance by (S - 1) / S;
tests/metrics/test_statistics.py checks coverage and power by simulation (docs/methods/metrics.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

LEVEL = 0.95


@dataclass(frozen=True)
class Estimate:
    """A mean difference with its standard error, degrees of freedom, interval and two-sided p."""

    diff: float
    se: float
    df: float
    low: float
    high: float
    p: float


def satterthwaite(terms: list[tuple[float, float]]) -> tuple[float, float]:
    """(variance, degrees of freedom) of a sum of variance terms ``(value, df)`` (Welch-Satterthwaite)."""
    var = float(sum(v for v, _ in terms))
    den = sum(v * v / d for v, d in terms if d > 0 and v != 0)
    return var, (var * var / den if den > 0 else np.inf)


def t_estimate(diff: float, var: float, df: float, level: float = LEVEL) -> Estimate:
    """The t interval and two-sided p of ``diff`` with variance ``var`` on ``df`` degrees of freedom."""
    se = float(np.sqrt(max(var, 0.0)))
    if se == 0:  # no variation at all: the difference is what it is
        return Estimate(diff, 0.0, df, diff, diff, 1.0 if diff == 0 else 0.0)
    q = stats.t.ppf((1 + level) / 2, df)
    return Estimate(diff, se, df, diff - q * se, diff + q * se, float(2 * stats.t.sf(abs(diff) / se, df)))


#: joins a query id to its occurrence in the keys of a query asked more than once (a continual stream asks every
#: query once per shift): ``<id>`` the first time, ``<id><REPEAT_MARK><n>`` the n-th
REPEAT_MARK = "\x1e#"


def query_of(keys: np.ndarray) -> np.ndarray:
    """The query id of each key, its occurrence dropped (:data:`REPEAT_MARK`)."""
    return np.array([str(k).split(REPEAT_MARK)[0] for k in keys])


def query_term(x: np.ndarray, keys: np.ndarray | None = None) -> tuple[float, float]:
    """``(variance, df)`` of the mean of the per-row differences ``x`` (N,) from the spread of its queries.

    Rows that are one query asked again (``keys`` with :data:`REPEAT_MARK`) move together, so the term is taken over
    the queries, not the rows (the cluster-robust variance of a mean): with every row its own query it is
    ``var(x) / N``, and a query repeated r times with the same difference counts once, not r times."""
    n = len(x)
    if keys is None:
        return (float(x.var(ddof=1)) / n if n > 1 else 0.0), n - 1
    return clustered_term(query_of(keys), (x - x.mean()) / n)


def clustered_term(queries: np.ndarray, parts: np.ndarray) -> tuple[float, float]:
    """``(variance, df)`` of a sum of centred, scaled row contributions ``parts`` whose rows of one query move
    together: (C / (C - 1)) * sum over the C queries of (their parts summed)^2, on C - 1 degrees of freedom."""
    _, index = np.unique(queries, return_inverse=True)
    c = int(index.max()) + 1 if len(index) else 0
    sums = np.bincount(index, weights=parts, minlength=c)
    return (float(c / (c - 1) * (sums ** 2).sum()) if c > 1 else 0.0), c - 1


def variance_terms(d: np.ndarray, keys: np.ndarray | None = None) -> tuple[list[tuple[float, float]],
                                                                            list[tuple[float, float]]]:
    """The query and seed variance terms ``(value, df)`` of the mean of ``d`` (S, N): the variance of the per-query
    means over N (``MS_query / (S N)``; over the queries when ``keys`` repeat some: :func:`query_term`) and of the
    per-seed means over S (``MS_seed / (S N)``; none with one seed)."""
    d = np.atleast_2d(np.asarray(d, dtype=np.float64))
    s = d.shape[0]
    return [query_term(d.mean(0), keys)], ([] if s == 1 else [(float(d.mean(1).var(ddof=1)) / s, s - 1)])


def paired_interval(d: np.ndarray, level: float = LEVEL, keys: np.ndarray | None = None) -> Estimate:
    """Mean of the paired differences ``d`` (seeds x queries) with its variance-components t interval and p;
    ``keys`` (N,), the rows' query keys, group a query asked more than once (:func:`query_term`)."""
    d = np.atleast_2d(np.asarray(d, dtype=np.float64))
    query, seed = variance_terms(d, keys)
    var, df = satterthwaite(query + seed)
    return t_estimate(float(d.mean()), var, df, level)


def pooled_interval(cells: list[tuple[np.ndarray, np.ndarray]], level: float = LEVEL) -> Estimate:
    """The mean over cells of their paired differences, each cell ``(d, query_keys)`` with ``d`` (S, N).

    Cells of one matrix share queries (the same captions or videos under every shift and backbone), so a query that
    one method handles well lifts every cell that asks it: the query term is cluster-robust over the query ids of all
    the cells together (each query's centred differences summed over the cells that ask it, as :func:`query_term`
    does within a cell). Cells that share every query give the variance of the per-query differences averaged over
    the cells; cells that share none add as independent. The seed terms of the cells add as independent (each cell
    is its own stream)."""
    if not cells:
        raise ValueError("no cells to pool")
    c = len(cells)
    diff = float(np.mean([np.mean(d) for d, _ in cells]))
    ids, parts = [], []
    for d, keys in cells:
        x = np.atleast_2d(np.asarray(d, dtype=np.float64)).mean(0)
        ids.append(query_of(keys))
        parts.append((x - x.mean()) / (c * len(x)))
    terms = [clustered_term(np.concatenate(ids), np.concatenate(parts))]
    terms += [(v / c ** 2, df) for d, _ in cells for v, df in variance_terms(d)[1]]
    var, df = satterthwaite(terms)
    return t_estimate(diff, var, df, level)


def holm(p: np.ndarray | list[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error control over all the given tests)."""
    p = np.asarray(p, dtype=np.float64)
    m = len(p)
    if m == 0:
        return p
    order = np.argsort(p, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adjusted
    return out
