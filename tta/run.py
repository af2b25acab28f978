"""Online test-time adaptation run: ``python -m tta.run model=xpool adapter=hatvtr shift=gaussian``.

One run = one (dataset, backbone, direction, adapter, shift, severity, seed), in named stages: scenario -> source
model and data (screened pairs, cached gallery, query stream) -> adapter -> Trainer.test over the stream -> scored
results written to the run directory (docs/outputs.md). The parts come from the config (tta/stages.py): the
job by the task's ``job._target_`` (:func:`stream`, or ``task=comp``'s probe), the data stages by ``data._target_``,
extra record fields from the callbacks that have them (``comp_probe.enabled``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import time
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

# Only light modules here: torch, Lightning and the models load when a run starts, so that a misspelt option or a
# bad run-level value is answered in about a second (tta/utils/cli.py); an adapter's option once its module loads.
from tta.console import print_results
from tta.stages import DATASET_STAGES, RunScope, open_run, register_resolvers
from tta.utils.cli import exit_on_user_error, run_command
from tta.utils.config import CONF_DIR, print_config_tree
from tta.utils.signals import RunInterrupted
from tta.utils.sweep import SKIPPED

log = logging.getLogger("tta.run")


def run(cfg: DictConfig, run_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    """One run of ``cfg`` and its results record (also written to ``results.json``): the job its task names by
    ``job._target_`` (:func:`stream`, or :func:`without_stream` for ``task=comp``'s probe)."""
    from hydra.utils import get_method

    return get_method(cfg.job._target_)(cfg, run_dir)


def stream(cfg: DictConfig, run_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    """The job of ``task=v2t|t2v``: the adapter over the query stream, scored and written to ``run_dir``."""
    from hydra.utils import get_method

    t_start, cpu_start = time.time(), time.process_time()
    cfg, run_dir, previous = open_run(cfg, run_dir)
    if previous is not None:  # this config's complete results are there already
        return previous
    from tta.callbacks import RESUME_FILE, resume_point, run_callbacks
    from tta.data.shift_effect import InputDistances
    from tta.results import StreamContext, provenance, score_stream, write_run
    from tta.scenario import Scenario
    from tta.stages import build_run_adapter, build_trainer, run_loggers
    from tta.utils.forking import fork_safe
    from tta.utils.loggers import log_results
    from tta.utils.timing import StageClock, device_sync, instrument, stream_clock_callback, time_record

    with RunScope(cfg, run_dir) as scope:
        scenario = Scenario.from_config(cfg)
        start_batch, state = resume_point(run_dir, cfg)
        parts = get_method(cfg.data.get("_target_", DATASET_STAGES))(cfg, scenario, scope.cache, start_batch)
        reference = parts.data.clean_reference()  # before the adapter touches the model
        adapter = build_run_adapter(cfg, parts, scenario)
        clock = instrument(adapter, StageClock(device_sync(adapter)), parts.data)  # time_s.split: where the stream's time goes
        scope.loggers = run_loggers(cfg, run_dir, t_start)
        distances = InputDistances()
        callbacks = [*run_callbacks(cfg, run_dir, state, scope.loggers, scope.stop, scenario, scope.cache), distances,
                     stream_clock_callback(clock)]
        t_stream, cpu_stream = time.time(), time.process_time()
        if parts.data.num_batches() > 0:
            with fork_safe():  # the query stream's loader workers
                build_trainer(cfg, callbacks, scope.loggers).test(adapter, datamodule=parts.data, verbose=False)
        elif state is not None:  # interrupted after its last batch, before writing results: nothing left to stream
            adapter.setup("test")
            adapter.load_resume_state(state)
        stream_s, stream_cpu = time.time() - t_stream, time.process_time() - cpu_stream
        n_scored = len(parts.data.layout.queries) * len(scenario.shifts)
        results, scored = score_stream(
            adapter, StreamContext.of_run(cfg, scenario, parts.data, reference, parts.data.input_change(
                distances.record())), source_weights=parts.source_weights,
            time_s={**time_record(clock, time.time() - t_start, stream_s, n_scored,
                                  cpu=(time.process_time() - cpu_start, stream_cpu)), "resumed_at_batch": start_batch})
        fields = {k: v for cb in callbacks if hasattr(cb, "record_fields") for k, v in cb.record_fields(adapter).items()}
        record = write_run(run_dir, dataclasses.replace(results, **fields, provenance=provenance(cfg, t_start)),
                           scored, adapter.history, k_occurrence=bool(cfg.save.k_occurrence), sims=bool(cfg.save.sims))
        log_results(scope.loggers, record, run_dir, step=len(adapter.history))
        (run_dir / RESUME_FILE).unlink(missing_ok=True)  # the results are complete: nothing left to resume
    return record


def without_stream(cfg: DictConfig, run_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    """The job of a task that streams nothing (``task=comp``): the record ``job.record`` computes from the scenario
    and the cache, written to ``run_dir/results.json``."""
    from hydra.utils import get_method

    t_start = time.time()
    cfg, run_dir, previous = open_run(cfg, run_dir)
    if previous is not None:  # this config's complete results are there already
        return previous
    from tta.scenario import Scenario
    from tta.utils.io import atomic_write_json

    with RunScope(cfg, run_dir) as scope:
        record = get_method(cfg.job.record)(cfg, Scenario.from_config(cfg), scope.cache, t_start)
        atomic_write_json(run_dir / "results.json", record)
    return record


@hydra.main(config_path=str(CONF_DIR), config_name="run", version_base="1.3")
def main(cfg: DictConfig) -> str | None:
    """The command line: one run, or one job of a sweep (whose callbacks print its line and the summary)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode
    from hydra.utils import get_method

    register_resolvers()  # a sweep's job may run in another process (submitit) and resolve the config there
    hc = HydraConfig.get()
    run_dir, multirun, started = hc.runtime.output_dir, hc.mode == RunMode.MULTIRUN, time.time()
    if cfg.get("print_config", False):
        print_config_tree(cfg)
    from tta.utils.reuse import single_use

    try:
        with contextlib.nullcontext() if multirun else single_use():  # only a sweep's next job reuses the model
            results = get_method(cfg.job._target_)(cfg, run_dir)  # run(cfg, run_dir) without its frame
    except RunInterrupted as e:  # the state is saved: exit "interrupted, resumable" (or requeue under submitit)
        if multirun:  # a BaseException: Hydra does not hand it to the sweep's callbacks
            from tta.utils.sweep import end_interrupted_job

            end_interrupted_job(Path(run_dir), e, hc.job)  # ends the process as e.exit() does
        log.warning("%s", e)
        e.exit()
    except Exception as e:
        if multirun:
            raise  # the sweep callback writes error.txt and the sweep goes on with the next job
        exit_on_user_error(e)
    if (Path(run_dir) / "results.json").stat().st_mtime < started:  # an earlier run's: nothing was computed
        if not multirun:  # a sweep's job says so in its status line
            log.info("%s: %s", SKIPPED, run_dir)
        return SKIPPED
    if not multirun:  # a sweep's jobs say it in one line each, and the sweep ends with a summary
        print_results(results)
        log.info("results written to %s", Path(run_dir) / "results.json")
    return None


def cli() -> None:
    """``python -m tta.run`` and the installed ``tta-run`` script: Hydra's own errors as one line too."""
    register_resolvers()  # before Hydra composes (${tta_dirname:...} of a sweep's job directories)
    run_command(main)


if __name__ == "__main__":
    cli()
