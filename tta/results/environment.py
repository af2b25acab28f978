"""Where and how a run was computed: code revision, package versions, device, peak memory (results.json
``provenance`` and ``cost``; docs/outputs.md)."""

from __future__ import annotations

import functools
import os
import platform
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig


def reset_peak_memory() -> bool:
    """Start this run's peak-memory window: a sweep runs many jobs in one process, whose lifetime peak would
    otherwise be charged to every later job. Returns whether the resident peak could be reset (Linux only)."""
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM, the resident-set high-water mark
        return True
    except OSError:
        return False


def _peak_rss_mb() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # the process's peak (KiB on Linux)


def cost_record(time_s: dict) -> dict[str, float | None]:
    """What the run cost: stream time per query, the share of the run the method's own work took, and peak memory
    since :func:`reset_peak_memory` (docs/outputs.md). ``method_share`` is not called ``adapt_share``: that key holds
    the stream's share in runs recorded before ``time_s.adapt`` became the method's own work (the reports keep the
    two apart: :func:`tta.reporting.collect.cost_fields`)."""
    total = float(time_s.get("total") or 0.0)
    gpu = torch.cuda.max_memory_allocated() / 2**20 if torch.cuda.is_available() else None
    return {"ms_per_query": time_s.get("per_query_ms"),
            "method_share": float(time_s.get("adapt", 0.0)) / total if total > 0 else None,
            "peak_rss_mb": _peak_rss_mb(), "peak_gpu_mb": gpu}


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    import hydra
    import lightning
    import numpy

    try:  # its version without importing it (open_clip's import costs seconds; a run of the embedded model skips it)
        open_clip = version("open_clip_torch")
    except PackageNotFoundError:
        open_clip = "not installed"
    return {"python": platform.python_version(), "torch": torch.__version__, "lightning": lightning.__version__,
            "open_clip": open_clip, "hydra": hydra.__version__, "numpy": numpy.__version__}


#: names the commit of a copy of the source that has no git history (a lent GPU machine gets the files alone)
COMMIT_VARIABLE = "TTA_COMMIT"


def git_revision(path: str | Path | None = None, exclude: tuple[str, ...] = ()) -> dict[str, Any] | None:
    """``{"commit", "dirty"}`` of the git checkout holding ``path`` (default: this package's source). Dirty = tracked
    files differ from the commit (untracked files do not count), apart from the ``exclude`` paths (relative to the
    checkout's root). Outside a checkout or without git: the commit that ``$TTA_COMMIT`` names, dirty unknown (None),
    or None without it."""
    import subprocess

    where = str(Path(path) if path else Path(__file__).resolve().parent)
    try:
        head = subprocess.run(["git", "-C", where, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=20)
        if head.returncode != 0:
            return _named_commit()
        status = subprocess.run(["git", "-C", where, "status", "--porcelain", "--untracked-files=no", "--", ":/",
                                 *(f":(top,exclude){p}" for p in exclude)], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return _named_commit()
    return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip()) if status.returncode == 0 else None}


def _named_commit() -> dict[str, Any] | None:
    named = os.environ.get(COMMIT_VARIABLE, "").strip()
    return {"commit": named, "dirty": None} if named else None


def device_name(accelerator: str = "auto") -> dict[str, str]:
    """The device a run's Trainer uses: ``{"type", "name"}`` (GPU model, or the CPU model)."""
    if accelerator in ("auto", "gpu", "cuda") and torch.cuda.is_available():
        return {"type": "cuda", "name": torch.cuda.get_device_name(0)}
    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"type": "cpu", "name": name}


@functools.cache
def code_revision() -> dict[str, Any] | None:
    """:func:`git_revision` of this package's source as this process first asked for it (a run asks at its start):
    the code a run executes is what it imported then, so a commit made while it trains must not claim its results."""
    return git_revision()


def provenance(cfg: DictConfig | None = None, started: float | None = None) -> dict[str, Any]:
    """Where and how a run was computed (results.json ``provenance``, every logger): the code's git revision when
    the run started (:func:`code_revision`; absent outside a checkout), package versions, video decoder, device,
    precision, threads, host, command line, start and end time (UTC ISO; end = now), and for a run's config the
    loader workers and the video shifts' device that ``auto`` resolved to."""
    import datetime
    import shlex
    import socket
    import sys
    import time

    def iso(t: float) -> str:
        return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat(timespec="seconds")

    trainer = (cfg.get("trainer") if cfg is not None else None) or {}
    from tta.media.video import video_decoder

    out: dict[str, Any] = {"git": code_revision(), "versions": versions(), "decoder": video_decoder(),
                           "device": device_name(str(trainer.get("accelerator", "auto"))),
                           "precision": str(trainer.get("precision", "32-true")),
                           "matmul_precision": torch.get_float32_matmul_precision(), "threads": torch.get_num_threads(),
                           "host": socket.gethostname(), "command": shlex.join(sys.argv),
                           "started": iso(started if started is not None else time.time()), "finished": iso(time.time())}
    if out["git"] is None:
        del out["git"]
    if cfg is not None and "loader_workers" in cfg:  # what `auto` became on this machine
        from tta.data.workers import loader_workers
        from tta.shifts import resolve_shift_device

        shift = str((cfg.get("shift") or {}).get("device", "auto"))
        accelerator = str(trainer.get("accelerator", "auto"))
        out["loader_workers"] = loader_workers(cfg.loader_workers, shift, accelerator)
        out["shift_device"] = str(resolve_shift_device(shift, accelerator, out["loader_workers"]))
    return out
