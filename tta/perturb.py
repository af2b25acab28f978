"""Write a perturbed copy of a dataset split: ``python -m tta.perturb data=synth shift=fog shift.severity=3``.

The MSRVTT-P of MLVP (docs/shifts/mlvp.md): one file per video under ``<out_dir>/<data>/<shift>_<severity>/`` —
``<video id>.npy`` (uint8 native-resolution perturbed frames (T, H, W, 3), the default, model-independent) or
``<video id>.pt`` (``{"video": float32 (T, 3, S, S) CLIP-normalised, "video_id"}``, MLVP's format) — and, for a
text shift, ``captions.json`` (a list of ``[video id, perturbed caption]``). The same code path as an on-the-fly
run (:meth:`tta.data.stream.ShiftSpec.native`, per-item seeds), so the copy equals what ``tta.run`` would feed
the model. Existing files are skipped (resumable; each file is written atomically) and videos are processed in
parallel (``workers``). ``manifest.json`` (written last) records the shift, severity, seed, options, the source,
library versions, the fallbacks used and, for mixed streams, the per-item plan. ``tta.run shift=<same>
shift.from_copy=<that directory>`` then reads the copy instead of perturbing on the fly. ``format=none`` writes no
copy: it runs motion blur or video defocus over the split only to fill their motion store (docs/shifts/mlvp.md,
"Speed"), for a sweep whose jobs start together.
"""

from __future__ import annotations

import io
import logging
import os
import platform
from pathlib import Path
from typing import Any

import hydra
import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from tta.data.cache import FrameCache, run_frame_cache
from tta.data.registry import dataset_root, load_pairs
from tta.data.stream import ShiftSpec
from tta.media.transforms import clip_transform
from tta.shifts.video.mixed import is_mixed, plan_summary
from tta.utils.cli import exit_on_user_error, run_command
from tta.utils.config import CONF_DIR
from tta.utils.config_rules import validate_config
from tta.utils.forking import fork_pool
from tta.utils.io import atomic_torch_save, atomic_write_bytes, atomic_write_json
from tta.utils.paths import cache_root
from tta.utils.progress import progress_iter

log = logging.getLogger("tta.perturb")

_JOB: dict[str, Any] = {}  # the worker's view of the job (inherited through fork)


def _write_one(i: int) -> str:
    shift, pairs, frames, out, fmt, size = (_JOB[k] for k in ("shift", "pairs", "frames", "out", "format", "size"))
    p = pairs[i]
    if fmt == "none":  # the flow blurs store each clip's motion as they go; the frames are not kept
        shift.native(p, frames)
        return "computed"
    file = out / f"{p.video_id}.{fmt}"
    if file.exists():
        return "skipped"
    clip = shift.native(p, frames)
    if fmt == "npy":
        buf = io.BytesIO()
        np.save(buf, clip.cpu().numpy())
        atomic_write_bytes(file, buf.getvalue())
    else:
        atomic_torch_save(file, {"video": clip_transform(clip, size), "video_id": p.video_id})
    return "written"


def _init_worker() -> None:
    import cv2

    torch.set_num_threads(1)
    cv2.setNumThreads(1)


def _versions() -> dict[str, str]:
    import av
    import cv2
    import scipy

    return {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__,
            "av": av.__version__, "opencv": cv2.__version__, "scipy": scipy.__version__}


def _fallbacks(shift: ShiftSpec, used: set[str]) -> dict[str, str]:
    """Offline fallbacks in effect (docs/shifts/mlvp.md, "Offline substitutes"), for the manifest."""
    out: dict[str, str] = {}
    opts = dict(shift.options)
    if "snow" in used:
        from tta.shifts.video.weather import _blur_impl

        out["snow.blur_impl"] = _blur_impl((opts if shift.name == "snow" else {}).get("blur_impl", "auto"))
    if "style_transfer_approx" in used:
        out["style_transfer"] = "style_transfer_approx (Lab statistics transfer, spec/mlvp.md §5.3)"
    if "main_object_occlusion" in used and shift.name == "main_object_occlusion":
        out["occlusion.box_source"] = f"{opts.get('box_source', 'metadata')} (fallback {opts.get('fallback', 'none')})"
    return out


def _add_resources(cfg: DictConfig, shift: ShiftSpec, used: set[str], pairs, frames: FrameCache, cache: Path,
                   manifest: dict) -> None:
    """The run-level resources the copy's shifts need (occlusion boxes, donor pool, motion store)."""
    if not used & {"main_object_occlusion", "event_insertion", "motion_blur", "video_defocus"}:
        return
    from tta.data.shift_resources import build_resources, motion_store_enabled

    model = None
    if "event_insertion" in used:
        from tta.synth.zoo import load_model

        model = load_model(cfg.model, cfg.model.checkpoint, cfg.data, cache,
                           recipe=list(cfg.get("embedded_recipe") or []))
    shift.resources.update(build_resources(shift, model, cfg.data, pairs, frames, cache,
                                           motion_store=motion_store_enabled(cfg.shift)))
    if "donor_pool" in shift.resources:
        manifest["donor_pool"] = {"size": len(shift.resources["donor_pool"]), "model": cfg.model.name}


def _run_items(todo: list[int], workers: int, description: str) -> list[str]:
    """:func:`_write_one` over ``todo`` (in ``workers`` forked processes when > 1), with a progress bar."""
    if workers > 1:
        with fork_pool(workers, initializer=_init_worker) as pool:
            return list(progress_iter(pool.imap(_write_one, todo, chunksize=4), len(todo), description))
    return list(progress_iter(map(_write_one, todo), len(todo), description))


FLOW_BLURS = ("motion_blur", "video_defocus")  # the shifts with a motion store


def _check_fill(cfg: DictConfig, shift: ShiftSpec, uses_store: bool) -> None:
    """One line when ``format=none`` has no motion store to fill."""
    from tta.data.shift_resources import motion_store_enabled

    if not uses_store:
        raise ValueError(f"format=none only fills the motion store of motion_blur and video_defocus; shift="
                         f"{shift.name} uses neither: choose format=npy or format=pt")
    if not motion_store_enabled(cfg.shift):
        raise ValueError("format=none fills the motion store, which shift.motion_store=false turns off")


def _frame_cache(cfg: DictConfig, cache: Path) -> FrameCache:
    """The run's frame cache (``data.num_frames``, ``inputs.max_side``): a copy holds the frames a run perturbs."""
    return run_frame_cache(cache, cfg.data.num_frames, (cfg.get("inputs") or {}).get("max_side"))


def fill_motion_store(cfg: DictConfig, shift: ShiftSpec, pairs: list, cache: Path) -> Path:
    """``format=none``: run the flow blurs over the split only to fill the motion store (nothing else is written),
    so that the jobs of a sweep started together all find each clip's flow; return the store's directory."""
    plan = shift.plan([p.video_id for p in pairs])
    todo = [i for i, (_, name, _) in enumerate(plan) if name in FLOW_BLURS]
    _check_fill(cfg, shift, bool(todo))
    frames = _frame_cache(cfg, cache)
    _add_resources(cfg, shift, set(FLOW_BLURS), pairs, frames, cache, {})
    _JOB.update(shift=shift, pairs=pairs, frames=frames, out=None, format="none", size=None)
    _run_items(todo, max(1, int(cfg.workers)), f"motion store ({shift.name})")
    log.info("motion store filled for %d %s items in %s", len(todo), cfg.data.name, cache / "motion")
    return cache / "motion"


def perturb(cfg: DictConfig) -> Path:
    """Write the copy described by ``cfg`` (conf/perturb.yaml) and return its directory (with ``format=none``,
    :func:`fill_motion_store`)."""
    validate_config(cfg)
    cache = cache_root(cfg.paths.cache_dir)
    options = cfg.shift.get("options")
    options = OmegaConf.to_container(options, resolve=True) if options is not None else {}
    seed = int(cfg.seed if cfg.get("shift_seed") is None else cfg.shift_seed)
    shift = ShiftSpec(cfg.shift.name, int(cfg.shift.severity), seed, tuple(sorted(options.items())))
    kind = shift.kind
    if kind == "clean":
        raise ValueError("shift=clean has nothing to perturb; choose a video or text shift")
    if cfg.format not in ("npy", "pt", "none"):
        raise ValueError(f"format must be npy, pt or none, got {cfg.format!r}")
    if cfg.format == "none" and not is_mixed(shift.name):  # before the data are loaded (or built)
        _check_fill(cfg, shift, shift.name in FLOW_BLURS)
    pairs = load_pairs(cfg.data, cfg.split, cache)
    if cfg.data.subset:
        pairs = pairs[: int(cfg.data.subset)]
    if cfg.format == "none":
        return fill_motion_store(cfg, shift, pairs, cache)
    out = Path(cfg.out_dir) / cfg.data.name / f"{shift.name}_{shift.severity}"
    out.mkdir(parents=True, exist_ok=True)
    plan = shift.plan([p.video_id for p in pairs])
    used = {name for _, name, _ in plan}
    manifest: dict[str, Any] = {
        "shift": shift.name, "severity": shift.severity, "seed": shift.seed, "options": dict(shift.options),
        "kind": kind, "data": cfg.data.name, "split": cfg.split, "num_items": len(pairs),
        "source": str(dataset_root(cfg.data, cache)), "versions": _versions(), "fallbacks": _fallbacks(shift, used)}
    if kind == "text":
        captions = [[p.video_id, shift.text(p.caption, p.caption_id or p.video_id)] for p in pairs]
        atomic_write_json(out / "captions.json", captions)
    else:
        frames = _frame_cache(cfg, cache)
        size = None
        if cfg.format == "pt":
            from tta.models.factory import tower_config

            size = tower_config(cfg.model).image_size
        _add_resources(cfg, shift, used, pairs, frames, cache, manifest)
        manifest.update(format=cfg.format, image_size=size, max_side=frames.max_side)
        _JOB.update(shift=shift, pairs=pairs, frames=frames, out=out, format=cfg.format, size=size)
        results = _run_items(list(range(len(pairs))), max(1, int(cfg.workers)), f"perturbing {shift.name}")
        manifest["written"], manifest["skipped"] = results.count("written"), results.count("skipped")
    if is_mixed(shift.name):
        manifest["plan"] = {"summary": plan_summary(plan), "items": [list(x) for x in plan]}
    atomic_write_json(out / "manifest.json", manifest)
    log.info("perturbed copy of %d %s items in %s", len(pairs), cfg.data.name, out)
    return out


@hydra.main(config_path=str(CONF_DIR), config_name="perturb", version_base="1.3")
def main(cfg: DictConfig) -> None:
    try:
        path = perturb(cfg)
    except Exception as e:
        exit_on_user_error(e)
    print(f"{'filled' if cfg.format == 'none' else 'wrote'} {path}")  # the CLI's one line of output


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    run_command(main)
