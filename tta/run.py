"""Online test-time adaptation run: ``python -m tta.run model=xpool adapter=hatvtr shift=gaussian``.

One run = one (dataset, backbone, direction, adapter, shift, severity, seed), in named stages:
scenario -> source model -> data (screened pairs, cached gallery, query stream) -> adapter -> Trainer.test over
the stream -> scored results written to the run directory (docs/outputs.md).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import hydra
from omegaconf import DictConfig, OmegaConf

# Only light modules here: torch, Lightning and the models load when a run starts (run_stages), so that a misspelt
# option or a bad value is answered in about a second (tta/utils/cli.py), not after ten seconds of imports.
from tta.utils.cli import exit_on_user_error, hydra_cli
from tta.utils.config import print_config_tree
from tta.utils.config_rules import validate_config
from tta.utils.forking import fork_safe
from tta.utils.io import claim_run_dir
from tta.utils.logs import quiet_lightning
from tta.utils.paths import cache_root
from tta.utils.progress import setup_progress
from tta.utils.signals import RunInterrupted, StopSignals
from tta.utils.sweep import register_resolvers, write_error

if TYPE_CHECKING:
    from tta.data.module import RetrievalDataModule
    from tta.scenario import Scenario

log = logging.getLogger("tta.run")
# trainer.precision values that keep the weights float32 (none or autocast): the gallery is encoded once in float32
# and the adapters mix it with query features, so a model cast to half or double precision ("*-true") cannot run
PRECISIONS = ("32-true", "32", "bf16-mixed", "16-mixed")
MATMUL_PRECISIONS = ("highest", "high", "medium")  # torch.set_float32_matmul_precision


def _query_task(shift: str) -> str:
    from tta.scenario import query_task  # it loads the shift registry: only when a config asks

    return query_task(shift)


register_resolvers()  # ${tta_dirname:...} of conf/run.yaml (sweep job directories)
if not OmegaConf.has_resolver("tta_query_task"):  # of experiment configs that sweep both directions
    OmegaConf.register_new_resolver("tta_query_task", _query_task)


def run(cfg: DictConfig, run_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    """Execute one online TTA run and return the results record (also written to ``results.json``)."""
    t_start = time.time()
    if cfg.data.name == "features":  # precomputed features: the file names the model, data, task and shift
        from tta.data.features import check_feature_adapter, features_run_config

        cfg = features_run_config(cfg, typed_overrides())
        check_feature_adapter(cfg)
    check_precision(cfg)
    validate_config(cfg)
    from tta.results import code_revision, complete_results  # after the checks: a bad value is answered at once

    code_revision()  # the revision of the code this run imported, before anyone can commit during it
    quiet_lightning()
    run_dir = Path(run_dir or os.getcwd())
    if cfg.get("skip_complete", False) and (previous := complete_results(run_dir, cfg)) is not None:
        log.info("%s already holds the complete results of this configuration; skipped", run_dir)
        return previous
    with claim_run_dir(run_dir), StopSignals() as stop, matmul_precision(cfg):
        try:
            record = run_stages(cfg, run_dir, stop, t_start)
        except Exception as e:  # the traceback stays with the run (tta.report lists it); resume.pt stays too
            write_error(run_dir, e)
            raise
    (run_dir / "error.txt").unlink(missing_ok=True)  # a failure of an earlier attempt is history now
    return record


def run_stages(cfg: DictConfig, run_dir: Path, stop: StopSignals, t_start: float) -> dict[str, Any]:
    """The stages of :func:`run` in a directory this process holds, with stop signals caught."""
    from tta.callbacks import RESUME_FILE, resume_point, run_callbacks
    from tta.data.shift_effect import InputDistances
    from tta.results import StreamContext, provenance, reset_peak_memory, score_stream, write_run
    from tta.scenario import Scenario
    from tta.utils.loggers import finish_loggers, log_results
    from tta.utils.seeding import seed_everything
    from tta.utils.timing import StageClock, device_sync, instrument, stream_clock_callback, time_record

    reset_peak_memory()
    seed_everything(cfg.seed)
    cache = cache_root(cfg.paths.cache_dir)
    scenario = Scenario.from_config(cfg)
    if scenario.task == "comp":  # the VideoComp probe alone: no stream, no adapter
        from tta.comp.probe import run_comp_task

        return run_comp_task(cfg, scenario, cache, run_dir, t_start)
    start_batch, state = resume_point(run_dir, cfg)
    model, data = build_data(cfg, scenario, cache, start_batch)
    reference = data.clean_reference()  # before the adapter touches the model
    weights = source_weights(cfg, model, data)
    adapter = build_run_adapter(cfg, model, data, scenario)
    clock = instrument(adapter, StageClock(device_sync(adapter)))  # time_s.split: where the stream's time goes
    loggers = run_loggers(cfg, run_dir, t_start)
    status = "failed"
    try:
        distances = InputDistances()
        stream_s = stream(cfg, adapter, data, [*run_callbacks(cfg, run_dir, state, loggers, stop), distances,
                                               stream_clock_callback(clock)], state, loggers)
        ctx = StreamContext(cfg, scenario.shifts, data.layout, data.report, data.num_read, data.video_pairs,
                            scenario.train_data.name, scenario.checkpoint, scenario.shifted_side(), data.copy,
                            reference, data.input_change(distances.record()), data.query_filter, scenario.gallery)
        n_scored = len(data.layout.queries) * len(scenario.shifts)
        results, scored = score_stream(adapter, ctx, time_s={
            **time_record(clock, time.time() - t_start, stream_s, n_scored), "resumed_at_batch": start_batch})
        if cfg.comp_probe.enabled:  # the adapted model as the stream left it, beside a fresh source model
            from tta.comp.probe import probe_models

            results.extra["comp"] = probe_models(cfg, cache, {"adapted": adapter.model,
                                                              "source": scenario.load_model(cfg, cache)})
        results.extra["source_weights"] = weights
        results.extra["provenance"] = provenance(cfg, t_start)
        record = write_run(run_dir, results, scored, adapter.history, cfg)
        log_results(loggers, record, run_dir, step=len(adapter.history))
        (run_dir / RESUME_FILE).unlink(missing_ok=True)  # the results are complete: nothing left to resume
        status = "finished"
    except RunInterrupted:
        status = "interrupted"
        raise
    finally:
        finish_loggers(loggers, status)
    return record


def build_run_adapter(cfg: DictConfig, model, data: RetrievalDataModule, scenario: Scenario):
    """The configured adapter over the source model and the cached gallery, tracking what the scoring reads."""
    from tta.adapters import build_adapter
    from tta.results import neighbour_width

    adapter = build_adapter(cfg, model, data.gallery, data.layout.gt, data.layout.gallery_class,
                            source_split=data.source_split(scenario.train_data))
    # results come from per-row ranks and neighbour lists; the (Q, G) scores are kept only to be saved
    adapter.track_scores(neighbour_width(int(cfg.hubness.k)), keep_rows=bool(cfg.save.sims),
                         head=int(cfg.save.get("sims_head") or 0))
    return adapter


def run_loggers(cfg: DictConfig, run_dir: Path, t_start: float) -> list:
    """The loggers of ``logger=``, started with the resolved config and the provenance known so far."""
    from tta.results import identity_keys, provenance
    from tta.utils.loggers import build_loggers

    config = OmegaConf.to_container(cfg, resolve=True)
    started = {k: v for k, v in provenance(cfg, t_start).items() if k != "finished"}
    return build_loggers(cfg.get("logger"), run_dir, {**config, "provenance": started}, identity=identity_keys(config))


def build_data(cfg: DictConfig, scenario: Scenario, cache: Path, start_batch: int):
    """The source model and the set-up data stages: the dataset's, or the exported features' (data=features)."""
    if cfg.data.get("features"):
        from tta.data.features import FeatureDataModule

        data = FeatureDataModule(cfg, scenario.shifts, start_batch)
        return data.model, data
    from tta.data.module import RetrievalDataModule
    from tta.media.video import video_decoder
    from tta.sharding import gallery_ranks
    from tta.synth.zoo import setup_stages

    # a first run builds the embedded assets: one overall bar with the stage names and an ETA
    stages = setup_stages(cfg.model, scenario.checkpoint, scenario.train_data, cfg.data, cache,
                          list(cfg.get("embedded_recipe") or []))
    with setup_progress(stages):
        model = scenario.load_model(cfg, cache)
        data = RetrievalDataModule(cfg, scenario.shifts, model, cache, start_batch, scenario.gallery_shift)
        log.info("video decoder: %s", video_decoder())
        with gallery_ranks(cfg):  # trainer.devices=N: the gallery in N shards, one per process
            data.setup("test")
    return model, data


def source_weights(cfg: DictConfig, model, data) -> str | None:
    """Digest of the source model's weights (results.json ``source_weights``): the report pairs two runs only when
    it is the same, since CPU training is not bit-reproducible across machines. Exported features carry their own."""
    if cfg.data.get("features"):
        return data.features.meta.get("source_weights")
    from tta.data.gallery import weights_digest

    return weights_digest(model)[:16]


def typed_overrides() -> list[str]:
    """The command-line overrides of a Hydra run ([] outside one)."""
    from hydra.core.hydra_config import HydraConfig

    return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []


def stream(cfg: DictConfig, adapter, data: RetrievalDataModule, callbacks: list, state: dict | None,
           loggers: list | None = None) -> float:
    """Stream the queries through the adapter under the configured Trainer; return the seconds it took."""
    start = time.time()
    if data.num_batches() > 0:
        trainer = build_trainer(cfg, callbacks, loggers)
        with fork_safe():  # the query stream's loader workers
            trainer.test(adapter, datamodule=data, verbose=False)
    elif state is not None:  # interrupted after its last batch, before writing results: nothing left to stream
        adapter.setup("test")
        adapter.load_resume_state(state)
    return time.time() - start


def check_precision(cfg: DictConfig) -> None:
    """Refuse a ``trainer.precision`` the stream cannot run under, or an unknown ``matmul_precision``, before
    anything is built."""
    precision = str(cfg.trainer.get("precision", "32-true"))
    if precision not in PRECISIONS:
        raise ValueError(f"trainer.precision={precision} is not supported: the cached gallery and the adapted "
                         f"weights stay float32; use trainer.precision=32-true (the default), bf16-mixed or 16-mixed")
    matmul = str(cfg.get("matmul_precision", "highest"))
    if matmul not in MATMUL_PRECISIONS:
        raise ValueError(f"matmul_precision={matmul} is not one of {', '.join(MATMUL_PRECISIONS)} (float32 matrix "
                         "products: highest = full float32, high = TF32, medium = bf16)")


@contextlib.contextmanager
def matmul_precision(cfg: DictConfig):
    """The run's float32 matrix-product precision (``matmul_precision``), the caller's restored afterwards (a
    process-wide torch setting; an in-process sweep or a test runs one run after another)."""
    import torch

    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(str(cfg.get("matmul_precision", "highest")))
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def build_trainer(cfg: DictConfig, callbacks: list, loggers: list | None = None):
    """The Lightning Trainer of ``trainer=`` (any Trainer flag), with the run's callbacks and loggers."""
    from hydra.utils import instantiate

    from tta.sharding import num_ranks

    single = {"devices": 1, "strategy": "auto"} if num_ranks(cfg) > 1 else {}  # the stream runs on rank 0 alone
    try:
        return instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False, **single)
    except (ValueError, TypeError, RuntimeError) as e:  # a flag Lightning refuses (e.g. an unknown precision)
        raise ValueError(f"trainer config rejected by Lightning: {e}") from e


def print_results(results: dict[str, Any]) -> None:
    """A rich table of the run's metrics (and of the VideoComp probe when it ran)."""
    from rich.console import Console
    from rich.table import Table

    if results.get("comp"):
        from tta.comp.probe import print_comp

        print_comp(results["comp"])
    if results.get("task") == "comp":
        return

    title = (f"{results['data']} {results['task']} | {results['model']} + {results['adapter']} | "
             f"{results['shift']} s{results['severity']} | Q={results['num_queries']} G={results['num_gallery']}")
    if (results.get("evaluation") or {}).get("protocol") == "multi_caption":
        title += " | multi-caption"
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
    skipped = results.get("skipped") or {}
    if skipped.get("n"):
        console.print(f"[yellow]skipped {skipped['n']} of {results.get('num_pairs_read')} test pairs "
                      f"{skipped['reasons']}: excluded from queries, gallery and metrics (results.json 'skipped')")
    if results.get("collapse", {}).get("collapsed"):
        console.print(f"[red]collapse: one gallery item is the top-1 of "
                      f"{100 * results['collapse']['top1_mode_share']:.0f}% of the queries")
    t = results["time_s"]
    console.print(f"time: {time_line(t)}")


def time_line(t: dict) -> str:
    """The run's time in one line: total, stream, and the stream's split when the run recorded one."""
    line = f"total {t['total']:.1f} s, stream {t.get('stream', t['adapt']):.1f} s ({t['per_query_ms']:.1f} ms/query)"
    if split := t.get("split"):
        line += " = " + ", ".join(f"{k} {v:.1f}" for k, v in split.items() if k != "decode_perturb")
        line += f"; items decoded and perturbed in {split.get('decode_perturb', 0.0):.1f} s"
    return line


@hydra.main(config_path="conf", config_name="run", version_base="1.3")
def main(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    hc = HydraConfig.get()
    run_dir = hc.runtime.output_dir
    multirun = hc.mode == RunMode.MULTIRUN
    if cfg.get("print_config", False):
        print_config_tree(cfg)
    try:
        results = run(cfg, run_dir)
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
    print_results(results)
    log.info("results written to %s", Path(run_dir) / "results.json")


def cli() -> None:
    """``python -m tta.run`` and the installed ``tta-run`` script: Hydra's own errors as one line too."""
    hydra_cli(main)


if __name__ == "__main__":
    cli()
