"""Sweep bookkeeping (the Hydra callbacks of ``conf/run.yaml``): checks before the first job, one line per
finished job, failures kept.

Hydra's launchers run every job of a sweep even when one fails and raise the first failure at the end, so no
result is lost; these callbacks add what a person following a sweep needs:

* before the first job: an output directory that cannot be written, or a swept choice that names no config, ends
  the sweep with one line and exit code 2;
* one log line per finished job (``OK``/``FAILED``/``skipped (complete)``, the swept choices, R@1 and skewness,
  time), at once for the local launcher and at the sweep's end for jobs run in other processes (submitit);
* a closing summary: jobs by status, the best and worst cells, and the ``python -m tta.report`` command;
* ``error.txt`` with the traceback in a failed job's directory, so ``tta.report`` can list the failures and a
  re-run of the sweep (same ``hydra.sweep.dir``) repeats exactly the jobs without a complete ``results.json``;
* a job interrupted by a signal (tta/utils/signals.py) ends the sweep with exit code 75, or requeues it under
  submitit; its ``resume.pt`` makes the re-run continue it. The interrupt is a ``BaseException``, which Hydra does
  not hand to these callbacks, so the job's own process reports it (:func:`end_interrupted_job`).
"""

from __future__ import annotations

import json
import logging
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from tta.utils.cli import ON_FAILURE, exit_with_line, full_error
from tta.utils.signals import RunInterrupted

log = logging.getLogger("tta.sweep")


class SweepLines(Callback):
    """Per-job status lines, error files and the closing summary of a multirun (single runs print their tables).

    A job ended in this process (the local launcher) gets its line at once; jobs run elsewhere (submitit) get
    theirs from their directories when the sweep ends, so they reach the terminal too.
    """

    def __init__(self) -> None:
        self.started = time.time()
        self.seen: set[str] = set()  # job directories whose line this process printed

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self.started, self.seen = time.time(), set()
        # Hydra raises a job's failure when the sweep ends, skipping on_multirun_end: the summary comes then too
        ON_FAILURE.append(lambda e: self.end_failed(config, e))

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        if config.hydra.mode is None or str(config.hydra.mode) != "RunMode.MULTIRUN":
            return
        job_dir = Path(config.hydra.runtime.output_dir)
        name = config.hydra.job.override_dirname or job_dir.name
        num = config.hydra.job.get("num", "?")
        self.seen.add(str(job_dir))
        if job_return.status == JobStatus.COMPLETED:
            if job_return._return_value == SKIPPED:
                log.info("job %s skipped (complete)  %s", num, name)
                return
            (job_dir / "error.txt").unlink(missing_ok=True)  # a failure of an earlier attempt is history now
            log.info("job %s OK      %s  |  %s", num, name, result_line(job_dir / "results.json"))
            return
        err = job_return._return_value  # the exception (reading .return_value would raise it)
        write_error(job_dir, err)
        _release_frames(err)
        log.error("job %s FAILED  %s  |  %s: %s (traceback in %s)", num, name, type(err).__name__, err,
                  job_dir / "error.txt")

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        self.summarise(config)

    def end_failed(self, config: DictConfig, err: BaseException) -> None:
        """The sweep ends on a failed job (``err``, Hydra's exception): the summary and exit code 1; the other jobs'
        results are kept. With HYDRA_FULL_ERROR=1 the exception's traceback follows instead."""
        jobs = self.summarise(config)
        if full_error():
            return
        failed = sum(j.status == "FAILED" for j in jobs)
        print(f"error: {failed or 'a'} job(s) of the sweep failed ({type(err).__name__}: {err}); each failed job's "
              f"traceback is in its error.txt, and re-running the sweep repeats only the jobs without results",
              file=sys.stderr)
        sys.exit(1)

    def summarise(self, config: DictConfig) -> list[SweepJob]:
        """The lines of jobs run in other processes, then the summary; returns the jobs."""
        sweep_dir = Path(config.hydra.sweep.dir)
        jobs = sweep_jobs(sweep_dir, self.started)
        for job in jobs:
            if str(job.path) not in self.seen:  # ran in another process: its line went to that job's log
                log.log(logging.ERROR if job.status == "FAILED" else logging.INFO, "job %-8s %s  |  %s",
                        job.status, job.path.name, job.detail)
        for line in sweep_summary(sweep_dir, jobs):
            log.info("%s", line)
        return jobs


SKIPPED = "skipped (complete)"  # what a job's task function returns when its directory already held its results


@dataclass
class SweepJob:
    """A job directory of a sweep as its files describe it."""

    path: Path
    status: str  # OK | FAILED | skipped (complete) | unfinished
    detail: str = ""
    results: dict | None = None


def sweep_jobs(sweep_dir: Path, started: float) -> list[SweepJob]:
    """The job directories of ``sweep_dir`` (those Hydra wrote a config into), with what this sweep did to each:
    results written since ``started`` (OK), an ``error.txt`` since then (FAILED), older results (skipped)."""
    jobs = []
    for config in sorted(sweep_dir.glob("*/.hydra/config.yaml")):
        path = config.parent.parent
        results, error = path / "results.json", path / "error.txt"
        if error.exists() and error.stat().st_mtime >= started:
            line = error.read_text(errors="replace").strip().splitlines()
            jobs.append(SweepJob(path, "FAILED", f"{line[-1] if line else 'failed'} (traceback in {error})"))
        elif results.exists():
            try:
                record = json.loads(results.read_text())
            except json.JSONDecodeError:
                record = None
            status = "OK" if results.stat().st_mtime >= started else SKIPPED
            jobs.append(SweepJob(path, status, result_line(results), record))
        else:
            jobs.append(SweepJob(path, "unfinished", "no results.json (interrupted, or not run)"))
    return jobs


def result_line(file: Path) -> str:
    """R@1, skewness and time of a job's ``results.json`` ("done" without one)."""
    try:
        res = json.loads(file.read_text())
        return (f"R@1 {res['retrieval']['R@1']:.2f}  skewness {res['hubness']['skewness']:.3f}  "
                f"{res['time_s']['total']:.0f} s")
    except (OSError, KeyError, TypeError, ValueError):
        return "done"


def sweep_summary(sweep_dir: Path, jobs: list[SweepJob]) -> list[str]:
    """A sweep's closing lines: job counts by status, the best and worst cells by R@1 (mean over seeds) and the
    command that renders the tables."""
    counts = {s: sum(j.status == s for j in jobs) for s in ("OK", "FAILED", SKIPPED, "unfinished")}
    lines = [f"sweep {sweep_dir}: {len(jobs)} jobs: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n)]
    cells: dict[str, list[float]] = {}
    for job in jobs:
        if job.results and (job.results.get("retrieval") or {}).get("R@1") is not None:
            cells.setdefault(cell_label(job), []).append(float(job.results["retrieval"]["R@1"]))
    if cells:
        ranked = sorted(cells.items(), key=lambda kv: sum(kv[1]) / len(kv[1]))
        for word, (label, values) in (("best ", ranked[-1]), ("worst", ranked[0]))[: 1 if len(cells) == 1 else 2]:
            seeds = f" ({len(values)} seeds)" if len(values) > 1 else ""
            lines.append(f"{word} R@1 {sum(values) / len(values):6.2f}  {label}{seeds}")
    if failed := [j.path.name for j in jobs if j.status == "FAILED"]:
        lines.append(f"failed (error.txt in each): {', '.join(failed)}")
    lines.append(f"tables: python -m tta.report {sweep_dir}")
    return lines


def cell_label(job: SweepJob) -> str:
    """A job's cell (every choice but the seed): its directory name without ``seed=`` items, or the record's
    model, adapter and shift where the directory is named by a hash."""
    parts = [p for p in job.path.name.split(",") if not p.startswith("seed=")]
    if "=" in job.path.name:
        return ",".join(parts) or "default"
    r = job.results or {}
    return f"{r.get('model')} {r.get('adapter')} {r.get('shift')} s{r.get('severity')}"


class CheckOutputDir(Callback):
    """Refuse, in one line and with exit code 2, an output directory that cannot be created or written, before
    Hydra tries to write its config there (which would end in a bare traceback)."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        _check_writable(Path(config.hydra.run.dir), "hydra.run.dir")

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        _check_writable(Path(config.hydra.sweep.dir), "hydra.sweep.dir")


class SweepNeedsMultirun(Callback):
    """A config that defines a sweep (``experiment=<name>``: ``hydra.sweeper.params``) started without ``-m`` would
    silently run the defaults once: refuse it in one line with the command to use, exit code 2."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        if not (config.hydra.get("sweeper") or {}).get("params"):
            return
        import shlex
        import sys

        choice = (config.hydra.runtime.get("choices") or {}).get("experiment")
        what = f"experiment={choice}" if choice else "this config (hydra.sweeper.params)"
        exit_with_line(f"{what} is a sweep: run it with -m: python -m tta.run -m {shlex.join(sys.argv[1:])}",
                       to_log=False)


class CheckSweepChoices(Callback):
    """A misspelt config-group choice anywhere in a sweep (``-m adapter=tent,tnet``, or in an experiment's
    ``hydra.sweeper.params``): one line and exit code 2 before the first job runs. Hydra composes each job only when
    it launches it, so the typo would otherwise end the sweep after every job before it had run."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        line = sweep_choice_error(config)
        if line is not None:
            if full_error():
                raise ValueError(line)
            exit_with_line(line, to_log=False)


def sweep_choice_error(config: DictConfig) -> str | None:
    """The first value of a config group in a sweep that names no config of it (None: all do). Call it while Hydra is
    initialised (a callback of the sweep, or inside ``initialize_config_dir``)."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    loader = GlobalHydra.instance().config_loader()
    params = config.hydra.sweeper.get("params") or {}
    lines = [*(f"{k}={v}" for k, v in params.items()), *config.hydra.overrides.task]
    for override in OverridesParser.create(config_loader=loader).parse_overrides(lines):
        options = loader.get_group_options(override.key_or_group)
        if not options or override.is_delete():  # a plain key
            continue
        # single values too: those of hydra.sweeper.params are applied per job, like the swept ones
        raws = override.sweep_iterator() if override.is_sweep_override() else [override.value()]
        values = [v for raw in raws for v in (raw if isinstance(raw, list) else [raw])]
        wrong = [str(v) for v in values if v is not None and str(v) not in options]
        if wrong:
            return (f"the sweep's {override.get_key_element()}= has {', '.join(map(repr, wrong))}, not a config of "
                    f"'{override.key_or_group}'; its options are: {', '.join(options)}")
    return None


def _check_writable(path: Path, key: str) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as e:
        if full_error():
            raise
        exit_with_line(f"the output directory {path} is not writable ({e.strerror or type(e).__name__}); "
                       f"choose another {key}=...", to_log=False)


def end_interrupted_job(job_dir: Path, err: RunInterrupted, job: DictConfig) -> None:
    """A sweep's job stopped by a signal: ``error.txt``, its line, then the sweep ends with exit code 75 (or the
    job is requeued under submitit); re-running the sweep resumes this job from its ``resume.pt``. ``job``: the
    job's ``hydra.job`` node."""
    write_error(job_dir, err)
    log.warning("job %s INTERRUPTED  %s  |  %s", job.get("num", "?"), job.get("override_dirname") or job_dir.name,
                err)
    err.exit()


def _release_frames(err: BaseException) -> None:
    """Drop the local variables of the finished frames of ``err``'s traceback (and of the exceptions it chains):
    Hydra keeps a failed job's exception until the sweep ends, and its frames would keep the job's model, data and
    loader workers alive through every later job. The text of the traceback stays as it was."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        traceback.clear_frames(err.__traceback__)
        err = err.__cause__ or err.__context__


def write_error(job_dir: Path, err: BaseException | None) -> None:
    """``error.txt`` with the traceback of a failed or interrupted job (tta.report lists these)."""
    text = "".join(traceback.format_exception(type(err), err, err.__traceback__)) if err else "unknown error"
    try:
        job_dir.mkdir(parents=True, exist_ok=True)
        (job_dir / "error.txt").write_text(text)
    except OSError as e:  # the directory itself is the problem (full, read-only): the terminal still has the error
        log.warning("could not write %s: %s", job_dir / "error.txt", e)


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
