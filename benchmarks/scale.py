"""Scale benchmark: a whole query stream scored against galleries of 1k to 1M items, at the feature level.

    python benchmarks/scale.py                            # G = 1k, 10k, 100k, 1M; 10,000 queries; every method
    python benchmarks/scale.py --quick                    # smoke: G = 200, 1,000; 64 queries
    python benchmarks/scale.py --sizes 1000000 --methods hsm_incremental --queries 1000,10000   # the Q x G check

No encoder runs: query and gallery embeddings (D = 512, L2-normalised) come from a seeded generative model, and each
batch of 16 queries is scored as q @ gallery^T (computed as (gallery @ q^T)^T), then goes through the adapter's own ``test_step`` (the method's
refinement, then :class:`tta.metrics.streaming.StreamScores`: ranks and top-15 neighbours, no score matrix kept).
Adapters are built by the runner's :func:`tta.adapters.build_adapter` from ``conf/adapter/<name>.yaml``.

Embeddings (docs/results/scale.md, "Embeddings"). Seed pairs (``--seed-pairs``, default 2,000) are read from
``--features FILE`` (a torch file with ``queries`` and ``gallery``, (N, D) each, row i of one paired with row i
of the other) or, without one, drawn from a documented seeded generator: a cone of clusters around one shared
direction (the anisotropy of CLIP-like embedding spaces, which makes a few gallery items the nearest neighbour of
many queries: hubs), gallery = cluster centre + noise, query = its gallery item + modality gap + noise. The seeds
are then expanded to any G with a model fitted to them: a diagonal-covariance Gaussian mixture over the gallery
side (k-means centres, per-cluster standard deviations, cluster weights) and, for queries, the paired offset
"query - gallery" as a Gaussian with fitted mean (the modality gap) and per-dimension deviation. Query i belongs
to gallery item i mod G.

Columns: milliseconds per query (stream wall time / queries), peak resident memory of the process during the stream
(VmHWM, reset before each stream: includes the gallery's G x D floats) and the peak above the memory held before
the stream (the method's and the accumulator's own), R@1 and k = 10 skewness of the refined scores. A stream that
passes ``--time-limit-s`` stops at a batch boundary and is reported on the queries it scored ("partial"); a
method whose state would not fit in ``--memory-limit-gb`` is skipped with its estimate. Times are per process and
machine: compare them only as ratios within one table.
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tta.adapters import build_adapter  # noqa: E402
from tta.adapters.base import QueryForward  # noqa: E402
from tta.metrics import hubness_from_occurrence, metrics_from_ranks  # noqa: E402
from tta.results import cost_record, neighbour_width, reset_peak_memory  # noqa: E402
from tta.utils.config import compose  # noqa: E402

# method -> (adapter config, overrides). QB-Norm's and DSL's stream banks are capped at 1,600 rows (HSM's 100
# batches of 16): their default, every row of the stream, is itself a Q x G memory term (docs/results/scale.md).
METHODS = {
    "source": ("source", []),
    "hsm_incremental": ("hsm", ["adapter.method.hsm.implementation=incremental"]),
    "hsm_direct": ("hsm", ["adapter.method.hsm.implementation=direct"]),
    "qbnorm": ("qbnorm", ["adapter.method.refiner.bank_size=1600"]),
    "dsl": ("dsl", ["adapter.method.refiner.bank_size=1600"]),
}
BANK_ROWS = 1600  # rows of the HSM (100 batches of 16), QB-Norm and DSL banks above
FULL_SIZES, QUICK_SIZES = (1_000, 10_000, 100_000, 1_000_000), (200, 1_000)


@dataclass
class Expansion:
    """The generative model fitted to seed pairs (module docstring)."""

    weights: torch.Tensor  # (C,) cluster shares
    means: torch.Tensor  # (C, D) gallery cluster centres
    stds: torch.Tensor  # (C, D) per-cluster standard deviations
    gap_mean: torch.Tensor  # (D,) mean of query - gallery
    gap_std: torch.Tensor  # (D,) its standard deviation


SEED_CLUSTERS, ITEM_SPREAD, QUERY_NOISE, GAP_NORM = 64, 0.006, 0.2, 0.5  # the seeded generator's constants


def seed_pairs(n: int, dim: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(queries, gallery) seed pairs from the documented generator (module docstring). The constants put R@1 of
    the source scores near 80 % at G = 1k and 65 % at 10k, with k = 10 skewness growing with G."""
    gen = torch.Generator().manual_seed(seed)
    normalize = torch.nn.functional.normalize
    shared = normalize(torch.randn(dim, generator=gen), dim=0)
    # cluster centres at cosine ~0.4 to the shared direction (a cone), tight items around them, noisy queries
    centres = normalize(shared + 2.4 * torch.randn(SEED_CLUSTERS, dim, generator=gen) / math.sqrt(dim), dim=1)
    cluster = torch.randint(0, SEED_CLUSTERS, (n,), generator=gen)
    gallery = normalize(centres[cluster] + ITEM_SPREAD * torch.randn(n, dim, generator=gen), dim=1)
    gap = GAP_NORM * normalize(torch.randn(dim, generator=gen), dim=0)
    queries = normalize(gallery + gap + QUERY_NOISE * torch.randn(n, dim, generator=gen), dim=1)
    return queries, gallery


def fit_expansion(queries: torch.Tensor, gallery: torch.Tensor, clusters: int, seed: int) -> Expansion:
    """k-means (20 Lloyd iterations) over the gallery seeds, then per-cluster moments and the query offset."""
    gen = torch.Generator().manual_seed(seed)
    means = gallery[torch.randperm(gallery.shape[0], generator=gen)[:clusters]].clone()
    for _ in range(20):
        assign = torch.cdist(gallery, means).argmin(dim=1)
        for c in range(clusters):
            members = gallery[assign == c]
            if len(members):
                means[c] = members.mean(dim=0)
    counts = torch.bincount(assign, minlength=clusters).float()
    stds = torch.stack([gallery[assign == c].std(dim=0, unbiased=False) if counts[c] > 1
                        else torch.full_like(means[c], 1e-3) for c in range(clusters)])
    gap = queries - gallery
    return Expansion(counts / counts.sum(), means, stds, gap.mean(dim=0), gap.std(dim=0))


def sample_gallery(model: Expansion, n: int, seed: int, chunk: int = 65_536) -> torch.Tensor:
    """(n, D) L2-normalised gallery items drawn from the mixture, in chunks (1M x 512 floats is 2 GB)."""
    gen = torch.Generator().manual_seed(seed)
    out = torch.empty(n, model.means.shape[1])
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        c = torch.multinomial(model.weights, m, replacement=True, generator=gen)
        rows = model.means[c] + model.stds[c] * torch.randn(m, model.means.shape[1], generator=gen)
        out[start:start + m] = torch.nn.functional.normalize(rows, dim=1)
    return out


def paired_queries(model: Expansion, gallery: torch.Tensor, num_queries: int, seed: int,
                   chunk: int = 1024) -> torch.Tensor:
    """(Q, D) queries, query i paired with gallery item i mod G. In chunks of rows (a multiple of 16: the same
    normal draws as one call), so that the temporaries, which the allocator may keep after freeing them, do not
    grow with Q and inflate the peak memory of the stream measured after them."""
    gen = torch.Generator().manual_seed(seed)
    out = torch.empty(num_queries, gallery.shape[1])
    for start in range(0, num_queries, chunk):
        m = min(chunk, num_queries - start)
        items = gallery[torch.arange(start, start + m) % gallery.shape[0]]
        noise = model.gap_std * torch.randn(m, gallery.shape[1], generator=gen)
        out[start:start + m] = torch.nn.functional.normalize(items + model.gap_mean + noise, dim=1)
    return out


def state_estimate_gb(method: str, num_gallery: int) -> float:
    """What a method holds beyond the gallery, from its bank's size (GB): what decides whether it is run."""
    if method == "hsm_direct":  # the float32 bank, its concatenation and the float32 softmax over the stack
        return 3 * BANK_ROWS * num_gallery * 4 / 1e9
    if method in ("qbnorm", "dsl"):  # the float32 bank and its float64 copy and exponent inside logsumexp
        return BANK_ROWS * num_gallery * (4 + 8 + 8) / 1e9
    if method == "hsm_incremental":  # float64 column statistics of up to twice the 100 stored blocks
        return 2 * 100 * num_gallery * 8 / 1e9
    return 0.0


def score_rows(queries: torch.Tensor, gallery: torch.Tensor, block: int = 8192) -> torch.Tensor:
    """queries @ gallery^T (B, G), computed as (gallery_block @ queries^T)^T per block of gallery rows: the same
    dot products (equal values here), which BLAS computes faster with the thin operand on the right, and each
    block's transpose happens in cache."""
    out = torch.empty(queries.shape[0], gallery.shape[0], dtype=queries.dtype)
    right = queries.T
    for first in range(0, gallery.shape[0], block):
        out[:, first:first + block] = (gallery[first:first + block] @ right).T
    return out


def make_adapter(method: str, gallery: torch.Tensor, gt: torch.Tensor):
    """The method's adapter from its config, bound to the feature gallery (the model is a stand-in: no encoder)."""
    # no Trainer drives test_step here: the adapter's per-batch self.log calls have nowhere to go
    warnings.filterwarnings("ignore", message=".*self.log.*")
    name, overrides = METHODS[method]
    cfg = compose("run", [f"adapter={name}", "task=v2t", *overrides])
    adapter = build_adapter(cfg, torch.nn.Identity(), gallery, gt)
    adapter.track_scores(neighbour_width(int(cfg.hubness.k)), keep_rows=False)
    adapter.forward_queries = lambda batch: QueryForward(batch["feats"], score_rows(batch["feats"], adapter.gallery))
    adapter.setup("test")
    adapter.prepare()
    return adapter


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def run_stream(method: str, gallery: torch.Tensor, queries: torch.Tensor, batch: int, time_limit_s: float) -> dict:
    """Stream ``queries`` through the method's adapter; cost and quality of what was scored."""
    gt = torch.arange(queries.shape[0]) % gallery.shape[0]
    adapter = make_adapter(method, gallery, gt)
    before = _rss_mb()
    reset_peak_memory()
    start, scored = time.perf_counter(), 0
    with torch.no_grad():
        for i, first in enumerate(range(0, queries.shape[0], batch)):
            index = torch.arange(first, min(first + batch, queries.shape[0]))
            adapter.test_step({"index": index, "feats": queries[index]}, i)
            scored = int(index[-1]) + 1
            if time.perf_counter() - start > time_limit_s:
                break
    seconds = time.perf_counter() - start
    peak = cost_record({})["peak_rss_mb"]
    rows = adapter.kept.scored.compute()
    occurrence = adapter.kept.scored.occurrence(10)
    return {"ms_per_query": 1000.0 * seconds / scored, "seconds": seconds, "scored": scored,
            "peak_rss_mb": peak, "peak_above_inputs_mb": peak - before,
            "R@1": metrics_from_ranks(rows["rank"])["R@1"],
            "skewness": hubness_from_occurrence(occurrence, 10, scored)["skewness"]}


def growth(rows: list[dict], key: str, method: str, small: int, large: int) -> float | None:
    """``key`` at gallery ``large`` over ``key`` at ``small`` for one method (None when either is missing)."""
    got = {r["gallery"]: r for r in rows if r["method"] == method and "skipped" not in r}
    if small in got and large in got:
        return got[large][key] / got[small][key]
    return None


def table(rows: list[dict], sizes: list[int], methods: list[str]) -> str:
    lines = ["| method | gallery G | queries | ms / query | peak RSS (MB) | peak above inputs (MB) | R@1 | "
             "skewness k=10 |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['method']} | {r['gallery']:,} | {r['queries']:,} | skipped: {r['skipped']} "
                         "| | | | |")
            continue
        partial = "" if r["scored"] == r["queries"] else f" (partial: {r['scored']:,})"
        lines.append(f"| {r['method']} | {r['gallery']:,} | {r['queries']:,}{partial} | {r['ms_per_query']:.2f} | "
                     f"{r['peak_rss_mb']:.0f} | {r['peak_above_inputs_mb']:.0f} | {r['R@1']:.1f} | "
                     f"{r['skewness']:.2f} |")
    lines += ["", "Growth ratios (time per query, peak RSS) between consecutive gallery sizes:", "",
              "| method | " + " | ".join(f"{a:,} -> {b:,}" for a, b in pairwise(sizes)) + " |",
              "|---|" + "---:|" * (len(sizes) - 1)]
    for m in methods:
        lines.append(f"| {m} | " + " | ".join(growth_cells(rows, sizes, m).values()) + " |")
    return "\n".join(lines)


def growth_cells(rows: list[dict], sizes: list[int], method: str) -> dict[str, str]:
    """One method's growth between consecutive gallery sizes, by column ("1,000 -> 10,000")."""
    cells = {}
    for a, b in pairwise(sizes):
        t, mem = growth(rows, "ms_per_query", method, a, b), growth(rows, "peak_rss_mb", method, a, b)
        cells[f"{a:,} -> {b:,}"] = "n/a" if t is None else f"{t:.1f}x time, {mem:.2f}x memory"
    return cells


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke sizes: G = 200 and 1,000, 64 queries")
    parser.add_argument("--sizes", help="gallery sizes, comma-separated (default 1000,10000,100000,1000000)")
    parser.add_argument("--queries", help="query counts, comma-separated (default 10000; --quick 64)")
    parser.add_argument("--methods", default=",".join(METHODS), help=f"comma-separated subset of {list(METHODS)}")
    parser.add_argument("--features", type=Path, help="torch file with paired 'queries' and 'gallery' seed features")
    parser.add_argument("--seed-pairs", type=int, default=2000)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--clusters", type=int, default=64)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--time-limit-s", type=float, default=600.0, help="per stream; it stops at a batch boundary")
    parser.add_argument("--memory-limit-gb", type=float, default=12.0, help="skip a method whose state exceeds it")
    parser.add_argument("--out", type=Path, help="write the markdown table here")
    parser.add_argument("--rows", type=Path, help="write the table as a row file for docs/results/rows/ (and the "
                                                  "growth ratios beside it, <name>-growth.jsonl; python -m "
                                                  "tta.report FILE --layout measurements)")
    args = parser.parse_args(argv)
    args.sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else list(QUICK_SIZES if args.quick
                                                                                   else FULL_SIZES)
    args.queries = [int(q) for q in args.queries.split(",")] if args.queries else [64 if args.quick else 10_000]
    args.methods = args.methods.split(",")
    unknown = [m for m in args.methods if m not in METHODS]
    if unknown:
        parser.error(f"unknown method(s) {unknown}; choose from {list(METHODS)}")
    return args


def seeds(args: argparse.Namespace) -> tuple[torch.Tensor, torch.Tensor, str]:
    """The seed pairs and where they came from."""
    if args.features is None:
        q, g = seed_pairs(args.seed_pairs, args.dim, args.seed)
        return q, g, f"seeded generator (seed {args.seed}, {args.seed_pairs} pairs, D = {args.dim})"
    blob = torch.load(args.features, map_location="cpu", weights_only=True)
    q, g = (torch.nn.functional.normalize(blob[k].float(), dim=1) for k in ("queries", "gallery"))
    return q, g, f"{args.features} ({len(g)} pairs, D = {g.shape[1]})"


def main(argv: list[str] | None = None) -> list[dict]:
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    seed_q, seed_g, origin = seeds(args)
    model = fit_expansion(seed_q, seed_g, args.clusters, args.seed)
    started = header(argv, origin)  # the commit and time the measurement started from
    started_at = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")
    rows: list[dict] = []
    for size in args.sizes:
        gallery = sample_gallery(model, size, args.seed + 1)
        for n_q in args.queries:
            queries = paired_queries(model, gallery, n_q, args.seed + 2)
            for method in args.methods:
                row = {"method": method, "gallery": size, "queries": n_q}
                need = state_estimate_gb(method, size)
                if need > args.memory_limit_gb:
                    row["skipped"] = f"state ~{need:.0f} GB > --memory-limit-gb {args.memory_limit_gb:g}"
                else:
                    row.update(run_stream(method, gallery, queries, args.batch, args.time_limit_s))
                rows.append(row)
                print({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}, flush=True)
        del gallery
    report = table(rows, args.sizes, args.methods)
    print(report)
    if args.out is not None:
        args.out.write_text(started + report + "\n")
    if args.rows is not None:
        command = " ".join(["python benchmarks/scale.py", *(sys.argv[1:] if argv is None else argv)])
        write_rows(args.rows, rows, args.sizes, args.methods, command, origin, started_at)
    return rows


#: the columns of the stream table, as its row file names them (tta/reporting/measurements.py)
COLUMNS = [{"name": "method"}, {"name": "gallery G", "format": "{:,}", "align": "right"},
           {"name": "queries", "align": "right"}, {"name": "ms / query", "format": "{:.2f}", "align": "right"},
           {"name": "peak RSS (MB)", "format": "{:.0f}", "align": "right"},
           {"name": "peak above inputs (MB)", "format": "{:.0f}", "align": "right"},
           {"name": "R@1", "format": "{:.1f}", "align": "right"},
           {"name": "skewness k=10", "format": "{:.2f}", "align": "right"}]


def write_rows(path: Path, rows: list[dict], sizes: list[int], methods: list[str], command: str, origin: str,
               started_at: str) -> list[Path]:
    """The two tables of :func:`table` as row files: ``path`` (a row per stream) and ``<path>-growth.jsonl``."""
    from tta.reporting.measurements import machine_line, utc_now, write_measurements

    streams = []
    for r in rows:
        queries = f"{r['queries']:,}" + ("" if r.get("scored", r["queries"]) == r["queries"]
                                         else f" (partial: {r['scored']:,})")
        cells = {"method": r["method"], "gallery G": r["gallery"], "queries": queries}
        if "skipped" in r:  # blank cells after the reason, as printed
            cells.update({"ms / query": f"skipped: {r['skipped']}", **{c["name"]: "" for c in COLUMNS[4:]}})
        else:
            cells.update({"ms / query": r["ms_per_query"], "peak RSS (MB)": r["peak_rss_mb"],
                          "peak above inputs (MB)": r["peak_above_inputs_mb"], "R@1": r["R@1"],
                          "skewness k=10": r["skewness"]})
        streams.append({"cells": cells, "measured": r})
    growth_rows = [{"cells": {"method": m, **growth_cells(rows, sizes, m)}} for m in methods]
    common = {"command": command, "date": f"{started_at} - {utc_now()}", "before": [f"Seed features: {origin}."],
              "machine": f"{machine_line()}; OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}"}
    growth_columns = [{"name": "method"}] + [{"name": f"{a:,} -> {b:,}", "align": "right"} for a, b in pairwise(sizes)]
    return [write_measurements(path, COLUMNS, streams, title="Streams by gallery size", **common),
            write_measurements(path.with_name(f"{path.stem}-growth.jsonl"), growth_columns, growth_rows,
                               title="Growth ratios (time per query, peak RSS) between consecutive gallery sizes",
                               **common)]


def header(argv: list[str] | None, origin: str) -> str:
    commit = subprocess.run(["git", "-C", str(Path(__file__).parent), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    command = " ".join(["python benchmarks/scale.py", *(sys.argv[1:] if argv is None else argv)])
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"Command: `{command}` (OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}), "
            f"commit {commit}, started {now}. Seed features: {origin}.\n\n")


if __name__ == "__main__":
    main()
