"""The parts a run (tta/run.py) composes, each built from the config: its opening (checks, code revision, complete
results), its scope (directory, signals, precision, loggers), the data stages (a dataset's, or exported features' by
``data._target_``), the adapter, the loggers and the Trainer. Heavy modules load inside the functions, when a run
starts."""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from tta.utils.compiling import compile_mode
from tta.utils.progress import setup_progress

if TYPE_CHECKING:
    from tta.data.settings import DataSettings

log = logging.getLogger("tta.run")
# trainer.precision values that keep the weights float32 (none or autocast): the gallery is encoded once in float32
# and the adapters mix it with query features, so a model cast to half or double precision ("*-true") cannot run
PRECISIONS = ("32-true", "32", "bf16-mixed", "16-mixed")
MATMUL_PRECISIONS = ("highest", "high", "medium")  # torch.set_float32_matmul_precision
DATASET_STAGES = "tta.stages.dataset_stages"  # the data stages of a config without data._target_


def prepare_config(cfg: DictConfig) -> DictConfig:
    """The run's config, checked before anything is built: ``data.prepare`` rewrites it first where the data names
    one (``data=features``: the exporting run's keys), then the precision and the value rules."""
    from hydra.utils import get_method

    from tta.utils.config_rules import validate_config

    if cfg.data.get("prepare"):
        cfg = get_method(cfg.data.prepare)(cfg)
    check_precision(cfg)
    validate_config(cfg)
    return cfg


def open_run(cfg: DictConfig, run_dir: str | Path | None) -> tuple[DictConfig, Path, dict | None]:
    """What every job (``job._target_``) does first: the config prepared and checked (a bad value is answered before
    anything loads), the code's revision taken, and the complete results of this very config when ``run_dir``
    holds them (``skip_complete``)."""
    import os

    cfg = prepare_config(cfg)
    from tta.results import code_revision, complete_results

    code_revision()  # the revision of the code this run imported, before anyone can commit during it
    run_dir = Path(run_dir or os.getcwd())
    return cfg, run_dir, complete_results(run_dir, cfg) if cfg.get("skip_complete", False) else None


@dataclass
class RunScope:
    """What holds for the whole of a run in ``run_dir``: the directory claimed, stop signals caught, the matmul
    precision set, peak memory and seeds reset; on failure the traceback goes to ``error.txt`` (tta.report lists it;
    ``resume.pt`` stays), and the loggers close with the run's status."""

    cfg: DictConfig
    run_dir: Path
    loggers: list = field(default_factory=list)

    def __enter__(self) -> RunScope:
        from tta.results import reset_peak_memory
        from tta.utils.io import claim_run_dir
        from tta.utils.logs import quiet_lightning
        from tta.utils.paths import cache_root
        from tta.utils.seeding import seed_everything
        from tta.utils.signals import StopSignals

        quiet_lightning()
        with contextlib.ExitStack() as stack:  # closed at once if one of them cannot be entered
            stack.enter_context(claim_run_dir(self.run_dir))
            self.stop = stack.enter_context(StopSignals())
            stack.enter_context(matmul_precision(self.cfg))
            self._stack = stack.pop_all()
        reset_peak_memory()
        seed_everything(self.cfg.seed)
        self.cache = cache_root(self.cfg.paths.cache_dir)
        return self

    def __exit__(self, kind, err, tb) -> None:
        from tta.utils.loggers import finish_loggers
        from tta.utils.signals import RunInterrupted
        from tta.utils.sweep import write_error

        finish_loggers(self.loggers, "finished" if err is None else
                       "interrupted" if isinstance(err, RunInterrupted) else "failed")
        if isinstance(err, Exception):
            write_error(self.run_dir, err)
        self._stack.__exit__(kind, err, tb)
        if err is None:
            (self.run_dir / "error.txt").unlink(missing_ok=True)  # a failure of an earlier attempt is history now


@dataclass
class DataStages:
    """The source model and the set-up data stages of a run, with the digest of the source weights (results.json
    ``source_weights``: the report pairs two runs only when it is the same, since CPU training is not
    bit-reproducible across machines)."""

    model: Any
    data: Any
    source_weights: str | None


def dataset_stages(cfg: DictConfig, scenario, cache: Path, start_batch: int) -> DataStages:
    """A dataset's stages: pairs -> screen -> layout -> gallery (encoded once, cached) -> the query stream."""
    from tta.data.gallery import weights_digest
    from tta.data.module import RetrievalDataModule
    from tta.media.video import video_decoder
    from tta.sharding import gallery_ranks
    from tta.synth.zoo import setup_stages

    # a first run builds the embedded assets: one overall bar with the stage names and an ETA
    stages = setup_stages(cfg.model, scenario.checkpoint, scenario.train_data, cfg.data, cache,
                          list(cfg.get("embedded_recipe") or []))
    with setup_progress(stages):
        model = scenario.load_model(cfg, cache)
        settings = data_settings(cfg)
        data = RetrievalDataModule(cfg.data, settings, scenario.shifts, model, cache, start_batch,
                                   scenario.gallery_shift)
        log.info("video decoder: %s", video_decoder())
        with gallery_ranks(cfg, settings):  # trainer.devices=N: the gallery in N shards, one per process
            data.setup("test")
    return DataStages(model, data, weights_digest(model)[:16])


def feature_stages(cfg: DictConfig, scenario, cache: Path, start_batch: int) -> DataStages:
    """Exported features' stages (``data=features``): the file's layout, gallery and query features."""
    from tta.data.features import FeatureDataModule

    data = FeatureDataModule(cfg.data.features, str(cfg.task), int(cfg.batch_size), scenario.shifts, start_batch)
    return DataStages(data.model, data, data.features.meta.get("source_weights"))


def features_config(cfg: DictConfig) -> DictConfig:
    """``data.prepare`` of ``data=features``: the exporting run's keys from the file, and a method that needs no
    encoders."""
    from omegaconf import open_dict

    from tta.data.features import check_feature_adapter, exported_config

    path = str(cfg.data.get("path") or "")
    exported = exported_config(cfg.data, typed_overrides())
    cfg = cfg.copy()
    with open_dict(cfg):  # the exporting run's keys replace this run's (whole nodes, not merged)
        for key, value in exported.items():
            cfg[key] = value
        cfg.data.features = path
        cfg.data._target_ = "tta.stages.feature_stages"
    check_feature_adapter(cfg.adapter, bool((cfg.get("comp_probe") or {}).get("enabled")))
    return cfg


def data_settings(cfg: DictConfig) -> DataSettings:
    """What the data stages read from the run's config besides ``data`` (:class:`tta.data.settings.DataSettings`)."""
    from tta.data.settings import DataSettings, GallerySettings, InputSettings
    from tta.data.shift_resources import motion_store_enabled
    from tta.data.workers import loader_workers

    shift, trainer, inputs = cfg.get("shift") or {}, cfg.trainer, cfg.get("inputs") or {}
    workers = loader_workers(cfg.get("loader_workers", 0), shift.get("device", "auto"), trainer.get("accelerator", "auto"))
    devices, transform = trainer.get("devices"), str(cfg.get("transform_device", "auto"))
    gallery = GallerySettings(OmegaConf.to_container(cfg.data, resolve=True), str(cfg.model.checkpoint),
                              str(trainer.get("accelerator", "auto")),
                              OmegaConf.to_container(devices) if OmegaConf.is_config(devices) else devices,
                              str(trainer.get("precision", "32-true")), workers, transform)
    return DataSettings(str(cfg.task), int(cfg.batch_size), int(cfg.hubness.k), workers, gallery,
                        InputSettings(inputs.get("on_bad", "skip"), inputs.get("duplicates", "error"),
                                      int(inputs.get("min_frames", 1)), inputs.get("max_side")),
                        shift.get("from_copy"), motion_store_enabled(shift), transform)


def typed_overrides() -> list[str]:
    """The command-line overrides of a Hydra run ([] outside one)."""
    from hydra.core.hydra_config import HydraConfig

    return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []


def build_run_adapter(cfg: DictConfig, parts: DataStages, scenario):
    """The configured adapter over the source model and the cached gallery, tracking what the scoring reads."""
    from tta.adapters import build_adapter
    from tta.results import neighbour_width

    data = parts.data
    adapter = build_adapter(cfg, parts.model, data.gallery, data.layout.gt, data.layout.gallery_class,
                            source_split=data.source_split(scenario.train_data))
    # results come from per-row ranks and neighbour lists; the (Q, G) scores are kept only to be saved
    adapter.track_scores(neighbour_width(int(cfg.hubness.k)), keep_rows=bool(cfg.save.sims),
                         head=int(cfg.save.get("sims_head") or 0))
    adapter.compile_encoder = compile_mode(cfg.get("compile", False))
    return adapter


def run_loggers(cfg: DictConfig, run_dir: Path, t_start: float) -> list:
    """The loggers of ``logger=``, started with the resolved config and the provenance known so far."""
    from tta.results import identity_keys, provenance
    from tta.utils.loggers import build_loggers

    config = OmegaConf.to_container(cfg, resolve=True)
    started = {k: v for k, v in provenance(cfg, t_start).items() if k != "finished"}
    return build_loggers(cfg.get("logger"), run_dir, {**config, "provenance": started}, identity=identity_keys(config))


def build_trainer(cfg: DictConfig, callbacks: list, loggers: list | None = None):
    """The Lightning Trainer of ``trainer=`` (any Trainer flag), with the run's callbacks and loggers."""
    import torch
    from hydra.utils import instantiate

    from tta.sharding import num_ranks

    single = {"devices": 1, "strategy": "auto"} if num_ranks(cfg) > 1 else {}  # the stream runs on rank 0 alone
    if cfg.trainer.get("deterministic") is False and not torch.are_deterministic_algorithms_enabled():
        single["deterministic"] = None  # already off: Lightning's call to turn it off imports torch's compiler (~1 s)
    try:
        return instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False, **single)
    except (ValueError, TypeError, RuntimeError) as e:  # a flag Lightning refuses (e.g. an unknown precision)
        raise ValueError(f"trainer config rejected by Lightning: {e}") from e


def check_precision(cfg: DictConfig) -> None:
    """Refuse a ``trainer.precision`` the stream cannot run under, an unknown ``matmul_precision`` or ``compile``
    value (the run's numeric settings: one check of how the stream computes), before anything is built."""
    precision = str(cfg.trainer.get("precision", "32-true"))
    if precision not in PRECISIONS:
        raise ValueError(f"trainer.precision={precision} is not supported: the cached gallery and the adapted "
                         f"weights stay float32; use trainer.precision=32-true (the default), bf16-mixed or 16-mixed")
    if precision == "16-mixed" and not _streams_on_cuda(cfg):
        raise ValueError("trainer.precision=16-mixed runs on a GPU only (on the CPU Lightning streams in bf16 instead, "
                         "while the gallery would be encoded in float16); use trainer.precision=bf16-mixed or 32-true")
    compile_mode(cfg.get("compile", False))
    matmul = str(cfg.get("matmul_precision", "highest"))
    if matmul not in MATMUL_PRECISIONS:
        raise ValueError(f"matmul_precision={matmul} is not one of {', '.join(MATMUL_PRECISIONS)} (float32 matrix "
                         "products: highest = full float32, high = TF32, medium = bf16)")


def _streams_on_cuda(cfg: DictConfig) -> bool:
    from tta.models.encode import trainer_device

    return trainer_device(cfg.trainer).startswith("cuda")


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


def register_resolvers() -> None:
    """The config resolvers of conf: ``${tta_dirname:...}`` (sweep job directories) and
    ``${tta_query_task:<shift>}`` (experiment configs that sweep both directions). The entry point registers them."""
    from tta.utils.sweep import job_dirname

    if not OmegaConf.has_resolver("tta_dirname"):
        OmegaConf.register_new_resolver("tta_dirname", job_dirname)
    if not OmegaConf.has_resolver("tta_query_task"):
        OmegaConf.register_new_resolver("tta_query_task", _query_task)
    if not OmegaConf.has_resolver("tta_config_groups"):
        OmegaConf.register_new_resolver("tta_config_groups", config_groups)


def config_groups() -> str:
    """The config groups a user chooses from and their options, one line each (``--help``): folders whose names
    start with ``_`` hold shared blocks that configs compose (``adapter/_shared``), not choices, and are left out."""
    from tta.utils.config import CONF_DIR

    lines = []
    for folder in sorted(p for p in CONF_DIR.rglob("*") if p.is_dir()):
        group = folder.relative_to(CONF_DIR).as_posix()
        options = sorted(f.stem for f in folder.glob("*.yaml"))
        if options and not any(part.startswith(("_", "hydra")) for part in group.split("/")):
            lines.append(f"{group}: {', '.join(options)}")
    return "\n".join(lines)


def _query_task(shift: str) -> str:
    from tta.scenario import query_task  # it loads the shift registry: only when a config asks

    return query_task(shift)
