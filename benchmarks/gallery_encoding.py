"""Gallery encoding time on the embedded benchmark: the in-process loop against tta.models.encode's path.

    python benchmarks/gallery_encoding.py                      # 200 t2v gallery videos, CPU
    python benchmarks/gallery_encoding.py --n 1000 --ranks 2 model=xpool   # any tta.run override after the options

The reference is the loop the donor pool and the clean evaluation used: each clip decoded and transformed in the
main process, batches of 32 encoded on the CPU in float32. The path under test is
:func:`tta.models.encode.encode_videos` with the run's ``loader_workers`` (decoding in DataLoader workers while
the model encodes), on the Trainer's device and precision (CPU float32 and bf16-mixed; CUDA when present), and
``--ranks N`` processes over torch.distributed (:mod:`tta.sharding`; the full data set-up of a run). Every
variant decodes from the MP4 files into a fresh frame cache ("cold"), then once more from that cache ("warm").
Each time is the fastest of ``--repeat`` interleaved rounds (the load of a shared machine comes and goes); ratios
are to the reference in the same run; "max abs diff" is the largest deviation from the reference's features.
The weights do not matter for the timing, so the model is the embedded architecture with random weights
(``model.checkpoint=none``): nothing is trained or read from the checkpoint cache. This is a measurement script, not a test.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tta.data.cache import FrameCache  # noqa: E402
from tta.data.module import RetrievalDataModule  # noqa: E402
from tta.data.registry import load_pairs  # noqa: E402
from tta.media.transforms import clip_transform  # noqa: E402
from tta.models.encode import EncodeSetting, PathClips, encode_videos  # noqa: E402
from tta.scenario import Scenario  # noqa: E402
from tta.sharding import gallery_ranks  # noqa: E402
from tta.stages import data_settings  # noqa: E402
from tta.utils.config import compose  # noqa: E402
from tta.utils.paths import cache_root  # noqa: E402


@torch.no_grad()
def reference(model, paths: list[str], frames: FrameCache, batch: int = 32) -> torch.Tensor:
    """The in-process loop: decode, transform and encode in the main process, CPU, float32."""
    out = []
    for i in range(0, len(paths), batch):
        clips = torch.stack([clip_transform(frames.get(p), model.image_size) for p in paths[i:i + batch]])
        out.append(model.encode_video(clips).float())
    return torch.cat(out)


def timed(fn) -> tuple[float, torch.Tensor]:
    start = time.perf_counter()
    feats = fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - start, feats


def variants(workers: int) -> list[tuple[str, EncodeSetting]]:
    out = [(f"encode_videos, {workers} workers, cpu 32-true", EncodeSetting("cpu", "32-true", workers)),
           (f"encode_videos, {workers} workers, cpu bf16-mixed", EncodeSetting("cpu", "bf16-mixed", workers))]
    if torch.cuda.is_available():
        out += [(f"encode_videos, {workers} workers, cuda 32-true", EncodeSetting("cuda:0", "32-true", workers)),
                (f"encode_videos, {workers} workers, cuda bf16-mixed", EncodeSetting("cuda:0", "bf16-mixed", workers))]
    return out


def sharded_setup(cfg_overrides: list[str], cache: Path, scratch: Path, ranks: int) -> float:
    """Seconds of a run's data set-up (screening, warm decoding, gallery) with ``ranks`` processes, cold caches."""
    run_cache = scratch / f"ranks{ranks}"
    run_cache.mkdir()
    for name in ("checkpoints", "data", "text"):  # the benchmark and models; frames and gallery start empty
        if (cache / name).exists():
            (run_cache / name).symlink_to(cache / name)
    cfg = compose("run", [*cfg_overrides, f"paths.cache_dir={run_cache}", f"trainer.devices={ranks}",
                          f"trainer.strategy={'ddp' if ranks > 1 else 'auto'}"])
    scenario = Scenario.from_config(cfg)
    settings = data_settings(cfg)
    data = RetrievalDataModule(cfg.data, settings, scenario.shifts, scenario.load_model(cfg, run_cache), run_cache)
    start = time.perf_counter()
    with gallery_ranks(cfg, settings):
        data.setup("test")
    return time.perf_counter() - start


def measure(model, paths: list[str], num_frames: int, workers: int, scratch: Path, repeat: int) -> list[tuple]:
    """(name, cold s, warm s, max |diff|) per path: the fastest of ``repeat`` interleaved rounds (a shared
    machine's load comes and goes; the minimum is the least disturbed measurement of each)."""
    paths_under_test = [("in-process loop, cpu 32-true (reference)", None), *variants(workers)]
    best: dict[str, list[float]] = {name: [float("inf"), float("inf")] for name, _ in paths_under_test}
    diff: dict[str, float] = {}
    ref = None
    for r in range(repeat):
        order = list(enumerate(paths_under_test))
        order = order[:1] + (order[1:] if r % 2 == 0 else order[:0:-1])  # variants reversed every other round
        for k, (name, setting) in order:
            frames = FrameCache(scratch / f"frames-{r}-{k}", num_frames)
            if setting is None:
                run = lambda fr=frames: reference(model, paths, fr)  # noqa: E731
            else:
                load = PathClips(frames, paths, model.image_size)
                run = lambda s=setting, ld=load: encode_videos(model, ld, len(paths), setting=s)  # noqa: E731
            cold, feats = timed(run)
            warm, _ = timed(run)
            ref = feats if setting is None else ref
            diff[name] = float((feats - ref).abs().max())
            best[name] = [min(best[name][0], cold), min(best[name][1], warm)]
    return [(name, *best[name], diff[name]) for name, _ in paths_under_test]


#: the printed table's columns, and the row file's (``--rows``; ``python -m tta.report FILE --layout measurements``)
TABLE = [{"name": "path"}, {"name": "cold s", "format": "{:.2f}", "align": "right"},
         {"name": "cold ratio", "format": "{:.2f}x", "align": "right"},
         {"name": "warm s", "format": "{:.2f}", "align": "right"},
         {"name": "warm ratio", "format": "{:.2f}x", "align": "right"},
         {"name": "max abs diff", "format": "{:.1e}", "align": "right"}]


def table_rows(measured: list[tuple], args) -> list[dict]:
    """One row per path; ratios are to the reference (the first) of the same run."""
    (_, ref_cold, ref_warm, _) = measured[0]
    return [{"cells": {"path": name, "cold s": cold, "cold ratio": ref_cold / cold, "warm s": warm,
                       "warm ratio": ref_warm / warm, "max abs diff": diff}, "n": args.n, "repeat": args.repeat}
            for name, cold, warm, diff in measured]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200, help="gallery videos (the first N test pairs)")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds; the fastest of each is shown")
    parser.add_argument("--ranks", type=int, default=0, help="also time the data set-up with 1 and N processes")
    parser.add_argument("--rows", help="also write the table as a row file for docs/results/rows/ "
                                       "(python -m tta.report FILE --layout measurements)")
    args, overrides = parser.parse_known_args()
    overrides = ["model.checkpoint=none", "task=t2v", f"data.subset={args.n}", *overrides]
    cfg = compose("run", overrides)
    cache = cache_root(cfg.paths.cache_dir)
    model = Scenario.from_config(cfg).load_model(cfg, cache).eval()
    paths = [p.video_path for p in load_pairs(cfg.data, "test", cache)[: args.n]]
    workers = data_settings(cfg).workers
    before = (f"{len(paths)} gallery videos, {cfg.data.num_frames} frames, model {cfg.model.name} ({cfg.model.arch}), "
              f"torch threads {torch.get_num_threads()}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}, "
              f"loader_workers={workers}, load average {os.getloadavg()[0]:.1f}, fastest of {args.repeat}")
    print(before)
    after = []
    with tempfile.TemporaryDirectory(prefix="tta-gallery-bench-") as tmp:
        scratch = Path(tmp)
        rows = table_rows(measure(model, paths, cfg.data.num_frames, workers, scratch, args.repeat), args)
        print("\n| " + " | ".join(c["name"] for c in TABLE) + " |\n|" + "---|" * len(TABLE))
        for row in rows:
            print("| " + " | ".join(c.get("format", "{}").format(row["cells"][c["name"]]) for c in TABLE) + " |")
        if args.ranks > 1:
            one = sharded_setup(overrides, cache, scratch, 1)
            many = sharded_setup(overrides, cache, scratch, args.ranks)
            after.append(f"data set-up (screening, decoding, gallery; cold): 1 process {one:.2f} s, {args.ranks} "
                         f"processes {many:.2f} s ({one / many:.2f}x); load average {os.getloadavg()[0]:.1f}")
            print("\n" + after[-1])
    if args.rows:
        from tta.reporting.measurements import write_measurements

        write_measurements(args.rows, TABLE, rows, title=f"Gallery encoding time, {len(paths)} videos",
                           before=[before], after=after)


if __name__ == "__main__":
    main()
