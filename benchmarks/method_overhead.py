"""Each method's cost against source, measured where it can be trusted: interleaved repeats on one pinned core.

    python benchmarks/method_overhead.py                          # every method, both backbones, 128 queries, 3 repeats
    python benchmarks/method_overhead.py --models xpool --adapters source,hatvtr --queries 320 --repeats 5
    python benchmarks/method_overhead.py --out docs/results/cost/method-overhead.jsonl    # the rows the docs read

The query stream (v2t, Gaussian noise at severity 5 by default: ``--shift``, ``--severity``, ``--task``) is decoded,
perturbed and collated once, then held in memory: every timed pass streams the same batches, so decoding and the
shift's own cost are not part of any method's time. Per repeat the source model's weights are restored and the
adapter rebuilt (set-up, e.g. EATA's Fisher, is not timed), then the stream runs through ``test_step`` as a run does.
Source and each method alternate (source, m, source, m, ...) so that drift of the machine reaches both alike; the
ratio is taken per adjacent pair and the median over repeats reported with its range. The process is pinned to one
core (``--core``) with one torch thread; other load on that core still counts: run it on an otherwise idle machine
and say in the page which machine it was (each row records it).

Rows (JSON lines): model, config, task, shift, severity, queries, repeats, ms_per_query (median), source_ms_per_query
(median of the source passes paired with it), ratio (median of the pairwise ratios), ratio_min, ratio_max, the
median stage split (forward, adapt, refine, score ms/query), machine, torch, commit, date. ``tta.report --cost`` and
the ``cost:`` key of docs/results/pages.yaml put them in the cost columns and the gain-against-cost plot
(:mod:`tta.reporting.overhead`). This is a measurement script, not a test.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
METHODS = ("tent", "read", "sar", "eata", "tcr", "hsm", "qbnorm", "dsl", "hatvtr")


def machine() -> str:
    """The CPU model and core count, for the rows and the page (the run record's own device naming)."""
    from tta.results.environment import device_name

    return f"{device_name('cpu')['name']}, {os.cpu_count()} cores"


def pin(core: int | None) -> str:
    """Pin this process to ``core`` with one torch thread; return what was done (for the rows)."""
    import torch

    torch.set_num_threads(1)
    if core is None or not hasattr(os, "sched_setaffinity"):
        return "unpinned, 1 thread"
    os.sched_setaffinity(0, {core})
    return f"core {core}, 1 thread"


def commit() -> str | None:
    out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or None


class Bench:
    """One backbone's model, gallery and in-memory query batches, and a timed pass of any adapter over them."""

    def __init__(self, model_name: str, args, extra: list[str]):
        from tta.scenario import Scenario
        from tta.stages import dataset_stages
        from tta.utils.config import compose
        from tta.utils.paths import cache_root

        self.overrides = [f"model={model_name}", f"task={args.task}", f"shift={args.shift}",
                          f"shift.severity={args.severity}", f"seed={args.seed}", "loader_workers=0",
                          f"batch_size={args.batch_size}", *extra]
        cfg = compose("run", [*self.overrides, "adapter=source"])
        self.cache = cache_root(cfg.paths.cache_dir)
        self.scenario = Scenario.from_config(cfg)
        self.parts = dataset_stages(cfg, self.scenario, self.cache, 0)
        self.model, self.data = self.parts.model, self.parts.data
        self.pristine = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        self.batches = []
        for batch in self.data.test_dataloader():  # decoded and perturbed once: no pass pays for the shift
            self.batches.append(batch)
            if sum(len(b["index"]) for b in self.batches) >= args.queries:
                break
        self.queries = sum(len(b["index"]) for b in self.batches)

    def run(self, adapter_name: str) -> tuple[float, dict]:
        """Seconds of one pass of ``adapter_name`` over the batches, and its stage split."""
        import torch

        from tta.stages import build_run_adapter
        from tta.utils.config import compose
        from tta.utils.seeding import seed_everything
        from tta.utils.timing import StageClock, instrument

        cfg = compose("run", [*self.overrides, f"adapter={adapter_name}"])
        seed_everything(cfg.seed)
        self.model.load_state_dict(self.pristine)
        adapter = build_run_adapter(cfg, self.parts, self.scenario)
        adapter.setup("test")
        clock = instrument(adapter, StageClock())
        with torch.inference_mode(False):
            start = time.perf_counter()
            for i, batch in enumerate(self.batches):
                adapter.test_step(batch, i)
            seconds = time.perf_counter() - start
        return seconds, clock.split()


def measure(bench: Bench, methods: list[str], repeats: int, say) -> list[dict]:
    """Interleaved passes (source, m) x repeats per method; one row per method (source's own row included)."""
    bench.run("source")  # warm-up: first-touch allocations and lazy imports are nobody's cost
    rows, source_all = [], []
    for m in methods:
        pairs = []
        for r in range(repeats):
            s, _ = bench.run("source")
            t, split = bench.run(m)
            pairs.append((s, t, split))
            source_all.append(s)
            say(f"  {m:8s} repeat {r + 1}/{repeats}: source {1000 * s / bench.queries:7.2f}, {m} "
                f"{1000 * t / bench.queries:7.2f} ms/query (x{t / s:.2f})")
        ratios = [t / s for s, t, _ in pairs]
        per_q = 1000.0 / bench.queries
        rows.append({"config": m, "ms_per_query": statistics.median(t for _, t, _ in pairs) * per_q,
                     "source_ms_per_query": statistics.median(s for s, _, _ in pairs) * per_q,
                     "ratio": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
                     "split_ms_per_query": {k: statistics.median(sp[k] for _, _, sp in pairs) * per_q
                                            for k in ("forward", "adapt", "refine", "score")}})
    if source_all:
        med = statistics.median(source_all) * 1000.0 / bench.queries
        rows.insert(0, {"config": "source", "ms_per_query": med, "source_ms_per_query": med, "ratio": 1.0,
                        "ratio_min": 1.0, "ratio_max": 1.0, "split_ms_per_query": None})
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="clip4clip,xpool")
    parser.add_argument("--adapters", default=",".join(METHODS), help="methods compared with source")
    parser.add_argument("--task", default="v2t")
    parser.add_argument("--shift", default="gaussian")
    parser.add_argument("--severity", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--queries", type=int, default=128, help="queries per pass (whole batches)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--core", type=int, default=0, help="the core to pin to (-1: do not pin)")
    parser.add_argument("--out", help="write the rows here (JSON lines)")
    args, extra = parser.parse_known_args(argv)
    methods = [m for m in args.adapters.split(",") if m and m != "source"]
    if args.repeats < 1 or args.queries < 1:
        sys.exit("error: --repeats and --queries must be at least 1")
    if args.core >= 0 and hasattr(os, "sched_getaffinity") and args.core not in os.sched_getaffinity(0):
        sys.exit(f"error: --core {args.core} is not available to this process {sorted(os.sched_getaffinity(0))}")
    import warnings

    import torch

    warnings.filterwarnings("ignore", message=".*self.log.*")  # test_step logs; no Trainer holds the adapter here
    pinned = pin(None if args.core < 0 else args.core)
    where = machine()
    date = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    rows = []
    for model in args.models.split(","):
        bench = Bench(model, args, extra)
        print(f"{model}: {bench.queries} queries in {len(bench.batches)} batches, {args.task} {args.shift} "
              f"s{args.severity}; {where}; {pinned}", flush=True)
        for row in measure(bench, methods, args.repeats, lambda s: print(s, flush=True)):
            rows.append({"model": model, **row, "task": args.task, "shift": args.shift, "severity": args.severity,
                         "queries": bench.queries, "repeats": args.repeats, "machine": where, "pinned": pinned,
                         "torch": torch.__version__, "commit": commit(), "date": date})
        if args.out:  # after each backbone: an interrupted benchmark keeps what it measured
            Path(args.out).write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"\n{'model':10s} {'config':8s} {'ms/query':>9s} {'source':>8s} {'ratio':>6s} {'range':>12s}")
    for r in rows:
        print(f"{r['model']:10s} {r['config']:8s} {r['ms_per_query']:9.2f} {r['source_ms_per_query']:8.2f} "
              f"{r['ratio']:6.2f} {r['ratio_min']:5.2f}-{r['ratio_max']:5.2f}")
    if args.out:
        Path(args.out).write_text("".join(json.dumps(r) + "\n" for r in rows))
        print(f"rows written to {args.out}")
    return rows


if __name__ == "__main__":
    main()
