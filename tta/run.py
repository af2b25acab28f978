"""Online test-time adaptation run: ``python -m tta.run model=xpool adapter=hatvtr shift=gaussian``.

One run = one (dataset, backbone, direction, adapter, shift, severity, seed). The gallery is encoded once by the
source model (and cached on disk across runs and shifts of the same side), the queries stream through the adapter
in batches of 16 under ``Trainer(inference_mode=False).test``, and the scored rows give the retrieval and hubness
metrics, written atomically to ``results.json`` in the run directory and printed as a table.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import time
from pathlib import Path
from typing import Any

import hydra
import lightning as L
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from torch.utils.data import DataLoader

from tta.adapters.base import OnlineAdapter
from tta.data.cache import FrameCache
from tta.data.registry import load_pairs
from tta.data.stream import Collate, PerturbedCopy, ShiftSpec, TextItems, VideoItems
from tta.metrics import hubness_metrics, k_occurrence, retrieval_metrics
from tta.models.encode import encode_texts, encode_videos
from tta.models.factory import model_from_config
from tta.models.retrieval import RetrievalModel
from tta.shifts.video.mixed import is_mixed, plan_summary
from tta.utils.io import atomic_torch_save, atomic_write_json
from tta.utils.logs import quiet_lightning
from tta.utils.paths import cache_root
from tta.utils.seeding import seed_everything

log = logging.getLogger("tta.run")


def _gallery_key(model: RetrievalModel, cfg: DictConfig, side: str, shift: ShiftSpec, n: int) -> str:
    ckpt = hashlib.sha1()
    for k, v in model.state_dict().items():
        if v.numel():
            ckpt.update(k.encode())
            ckpt.update(v.flatten()[:: max(1, v.numel() // 64)].float().numpy().tobytes())
    data = OmegaConf.to_container(cfg.data, resolve=True)
    key = [ckpt.hexdigest(), data, side, shift.name, shift.severity, shift.seed, n]
    if shift.options and shift.name != "clean":  # options change a shifted gallery (clean keys stay as they were)
        key.append([list(o) for o in shift.options])
    blob = json.dumps(key, sort_keys=True, default=str)
    return hashlib.sha1(blob.encode()).hexdigest()[:16]


def encode_gallery(model: RetrievalModel, pairs, cfg: DictConfig, shift: ShiftSpec, frames: FrameCache,
                   cache: Path, copy: PerturbedCopy | None = None) -> torch.Tensor:
    """Gallery features by the source model, no grad: (G, D) captions for v2t, (G, T, D) frames for t2v."""
    side = "text" if cfg.task == "v2t" else "video"
    gshift = shift if shift.kind == side else ShiftSpec()
    gcopy = copy if shift.kind == side else None
    file = cache / "gallery" / f"{side}-{_gallery_key(model, cfg, side, gshift, len(pairs))}.pt"
    if file.exists() and gcopy is None:
        return torch.load(file)
    start = time.time()
    if side == "text":
        items = TextItems(pairs, gshift, gcopy)
        feats = encode_texts(model, [items.text(i) for i in range(len(pairs))])
    else:
        items = VideoItems(pairs, frames, model.image_size, gshift, gcopy)
        frames.warm([p.video_path for p in pairs], "decoding gallery videos")
        feats = encode_videos(model, items.clip, len(pairs))
    if gcopy is None:
        atomic_torch_save(file, feats)
    log.info("encoded the %s gallery (%d items) in %.1f s; cached at %s", side, len(pairs), time.time() - start, file)
    return feats


def _versions() -> dict[str, str]:
    import lightning
    import open_clip

    return {"python": platform.python_version(), "torch": torch.__version__, "lightning": lightning.__version__,
            "open_clip": open_clip.__version__}


def run(cfg: DictConfig, run_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    """Execute one online TTA run and return the results record (also written to ``results.json``)."""
    t_start = time.time()
    quiet_lightning()
    run_dir = Path(run_dir or os.getcwd())
    seed_everything(cfg.seed)
    cache = cache_root(cfg.paths.cache_dir)
    options = cfg.shift.get("options")
    options = OmegaConf.to_container(options, resolve=True) if options is not None else {}
    shift = ShiftSpec(cfg.shift.name, int(cfg.shift.severity), int(cfg.seed), tuple(sorted(options.items())))
    shift_kind = shift.kind  # validates the name
    if shift_kind != "clean" and not is_mixed(shift.name):
        from tta.shifts.registry import check_severity, get_shift

        check_severity(get_shift(shift.name), shift.severity)

    model = model_from_config(cfg.model, cfg.model.checkpoint, cfg.data, cache,
                              recipe=list(cfg.get("embedded_recipe") or []))
    pairs = load_pairs(cfg.data, "test", cache)
    if cfg.data.subset:
        pairs = pairs[: int(cfg.data.subset)]
    if len(pairs) == 0:
        raise ValueError("the test split is empty")
    frames = FrameCache(cache / "frames", cfg.data.num_frames)
    copy = PerturbedCopy(cfg.shift.from_copy, shift) if cfg.shift.get("from_copy") else None
    if shift_kind == "video" and copy is None:  # occlusion boxes, event-insertion donor pool (spec/mlvp.md §4.9, §4.11)
        from tta.shifts.video.resources import build_resources

        shift.resources.update(build_resources(shift, model, cfg.data, pairs, frames, cache))
    gallery = encode_gallery(model, pairs, cfg, shift, frames, cache, copy)
    query_side = "video" if cfg.task == "v2t" else "text"
    qcopy = copy if shift_kind == query_side else None
    if query_side == "video":
        frames.warm([p.video_path for p in pairs], "decoding query videos")
        queries = VideoItems(pairs, frames, model.image_size, shift if shift_kind == "video" else ShiftSpec(), qcopy)
    else:
        queries = TextItems(pairs, shift if shift_kind == "text" else ShiftSpec(), qcopy)
    gt = torch.arange(len(pairs))

    adapter: OnlineAdapter = instantiate(cfg.adapter.method)
    if cfg.get("posthoc") is not None and cfg.posthoc.get("_target_"):
        adapter.posthoc = instantiate(cfg.posthoc)  # a gradient-free refiner after any adapter (conf/posthoc/)
    adapter.bind(model, cfg.task, gallery, gt)
    n_source = adapter.needs_source_split()
    if n_source:  # clean training-split data some options ask for (EATA's Fisher, QB-Norm's training bank)
        from tta.data.source_split import SourceSplit

        adapter.source_split = SourceSplit(model, load_pairs(cfg.data, "train", cache), n_source, cfg.task, frames)
    loader = DataLoader(queries, batch_size=cfg.batch_size, shuffle=False, num_workers=cfg.loader_workers,
                        collate_fn=Collate(model.tokenizer if query_side == "text" else None))
    trainer = L.Trainer(accelerator=cfg.trainer.accelerator, devices=1, inference_mode=False, logger=False,
                        enable_checkpointing=False, enable_model_summary=False,
                        enable_progress_bar=cfg.trainer.progress_bar, deterministic=cfg.trainer.deterministic)
    t_adapt = time.time()
    trainer.test(adapter, dataloaders=loader, verbose=False)
    adapt_s = time.time() - t_adapt
    sims, order = adapter.scores()
    if not torch.equal(order, gt):
        raise RuntimeError("scored rows are not in stream order")
    if not torch.isfinite(sims).all():
        raise FloatingPointError("the scored similarity matrix contains NaN/inf; the run's metrics would be invalid")

    k = int(cfg.hubness.k)
    hub = hubness_metrics(sims, k=k)
    hub["k"] = k
    hub["k1_skewness"] = hubness_metrics(sims, k=1)["skewness"]
    results = {
        "task": cfg.task, "model": cfg.model.name, "adapter": cfg.adapter.name,
        "posthoc": getattr(adapter.posthoc, "name", "none"), "shift": shift.name,
        "severity": shift.severity, "data": cfg.data.name, "seed": int(cfg.seed),
        "shifted_side": "none" if shift_kind == "clean" else ("query" if shift_kind == query_side else "gallery"),
        "num_queries": int(sims.shape[0]), "num_gallery": int(sims.shape[1]),
        "retrieval": retrieval_metrics(sims, gt, median=cfg.metrics.median),
        "hubness": hub,
        "median_convention": cfg.metrics.median,
        "counters": {**adapter.counters, **(adapter.posthoc.stats() if adapter.posthoc is not None else {})},
        "time_s": {"total": time.time() - t_start, "adapt": adapt_s,
                   "per_query_ms": 1000.0 * adapt_s / max(1, sims.shape[0])},
        "versions": _versions(),
        "config": OmegaConf.to_container(cfg, resolve=True),
        **_shift_record(shift, pairs, copy),
    }
    atomic_write_json(run_dir / "results.json", results)
    atomic_write_json(run_dir / "history.json", [vars(r) for r in adapter.history])
    if cfg.save.k_occurrence:
        atomic_write_json(run_dir / "k_occurrence.json", {"k": 15, "counts": k_occurrence(sims, 15).tolist()})
    if cfg.save.sims:
        atomic_torch_save(run_dir / "sims.pt", sims.half())
    return results


def _shift_record(shift: ShiftSpec, pairs, copy: PerturbedCopy | None) -> dict[str, Any]:
    """What the shift did per item: the plan of a mixed stream, the donors of event insertion, the copy used."""
    out: dict[str, Any] = {}
    if shift.name != "clean":
        out["shift_options"] = dict(shift.options)
    if copy is not None:
        out["perturbed_copy"] = {"path": str(copy.root), "manifest": copy.manifest}
    if is_mixed(shift.name):
        plan = shift.plan([p.video_id for p in pairs])
        out["shift_plan"] = {"summary": plan_summary(plan), "items": [list(x) for x in plan]}
    pool = shift.resources.get("donor_pool")
    if pool is not None:
        ids = [v for v, name, _ in shift.plan([p.video_id for p in pairs]) if name == "event_insertion"]
        out["donor_pool"] = {"size": len(pool), "query": shift.resources.get("donor_query"),
                             "donors": pool.plan(ids, shift.resources.get("donor_query", "caption_text"))}
    return out


def print_results(results: dict[str, Any]) -> None:
    """A rich table of the run's metrics."""
    from rich.console import Console
    from rich.table import Table

    title = (f"{results['data']} {results['task']} | {results['model']} + {results['adapter']} | "
             f"{results['shift']} s{results['severity']} | Q={results['num_queries']} G={results['num_gallery']}")
    table = Table(title=title)
    r, h = results["retrieval"], results["hubness"]
    for key in ("R@1", "R@5", "R@10", "R@50", "MdR", "MnR"):
        table.add_column(key, justify="right")
    table.add_row(*(f"{r[key]:.2f}" if key.startswith("R@") else f"{r[key]:.1f}" for key in ("R@1", "R@5", "R@10", "R@50", "MdR", "MnR")))
    hub = Table(title=f"hubness (k={h['k']})")
    keys = ("skewness", "trunc_skewness", "atkinson", "robin_hood", "antihub", "hub_occurrence")
    for key in keys:
        hub.add_column(key, justify="right")
    hub.add_row(*(f"{h[key]:.3f}" for key in keys))
    console = Console()
    console.print(table)
    console.print(hub)
    t = results["time_s"]
    console.print(f"time: total {t['total']:.1f} s, adaptation {t['adapt']:.1f} s ({t['per_query_ms']:.1f} ms/query)")


@hydra.main(config_path="../conf", config_name="run", version_base="1.3")
def main(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig

    run_dir = HydraConfig.get().runtime.output_dir
    results = run(cfg, run_dir)
    print_results(results)
    log.info("results written to %s", Path(run_dir) / "results.json")


if __name__ == "__main__":
    main()
