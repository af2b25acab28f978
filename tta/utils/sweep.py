"""Sweep bookkeeping (Hydra callback ``hydra.callbacks.sweep_lines``): one line per finished job, failures kept.

Hydra's launchers run every job of a sweep even when one fails and raise the first failure at the end, so no
result is lost; this callback adds what a person following a sweep needs:

* one log line per finished job (``OK``/``FAILED``, the swept choices, R@1 and skewness, time), printed by the
  process that ran the job (the terminal for the local launcher, the job's log for submitit);
* ``error.txt`` with the traceback in a failed job's directory, so ``tta.report`` can list the failures and a
  re-run of the sweep (same ``hydra.sweep.dir``) repeats exactly the jobs without a complete ``results.json``.
"""

from __future__ import annotations

import json
import logging
import traceback
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

log = logging.getLogger("tta.sweep")


class SweepLines(Callback):
    """Per-job status lines and error files for multiruns (single runs print their own tables)."""

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        if config.hydra.mode is None or str(config.hydra.mode) != "RunMode.MULTIRUN":
            return
        job_dir = Path(config.hydra.runtime.output_dir)
        name = config.hydra.job.override_dirname or job_dir.name
        num = config.hydra.job.get("num", "?")
        if job_return.status == JobStatus.COMPLETED:
            line = "done"
            file = job_dir / "results.json"
            if file.exists():
                res = json.loads(file.read_text())
                line = (f"R@1 {res['retrieval']['R@1']:.2f}  skewness {res['hubness']['skewness']:.3f}  "
                        f"{res['time_s']['total']:.0f} s")
            (job_dir / "error.txt").unlink(missing_ok=True)  # a failure of an earlier attempt is history now
            log.info("job %s OK      %s  |  %s", num, name, line)
            return
        err = job_return._return_value  # the exception (reading .return_value would raise it)
        text = "".join(traceback.format_exception(type(err), err, err.__traceback__)) if err else "unknown error"
        job_dir.mkdir(parents=True, exist_ok=True)
        (job_dir / "error.txt").write_text(text)
        log.error("job %s FAILED  %s  |  %s: %s (traceback in %s)", num, name, type(err).__name__, err,
                  job_dir / "error.txt")


def job_dirname(override_dirname: str, identity: str = "", max_len: int = 100) -> str:
    """A job's directory name in a sweep, stable across re-runs of the sweep.

    Its overrides (``adapter=tcr,shift=fog``) when they are short; otherwise the run's identity
    (``<model>_<adapter>_<shift>_s<severity>_seed<seed>``) and a hash of all its overrides, so the name stays
    readable, unique and within file-name limits. Path separators become ``_``. Registered as the resolver
    ``${tta_dirname:<override_dirname>,<identity>}``.
    """
    import hashlib

    name = (override_dirname or "default").replace("/", "_").replace("\\", "_")
    if len(name) <= max_len:
        return name
    digest = hashlib.sha1(name.encode()).hexdigest()[:10]
    prefix = (identity or name[: max_len - 11]).replace("/", "_").replace("\\", "_")
    return f"{prefix}-{digest}"


def register_resolvers() -> None:
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("tta_dirname"):
        OmegaConf.register_new_resolver("tta_dirname", job_dirname)
