"""The scenario of a run (``scenario=`` group): which source model, which shifts, and on which side.

``qs`` fine-tunes on the evaluated dataset and shifts the query side; ``cross`` fine-tunes on another dataset
(``scenario.train_data``); ``zeroshot`` uses the pretrained towers; ``continual`` streams several shifts over the
same queries (HAT-VTR Sec. 5 and App. D; docs/methods/protocol.md).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from tta.data.stream import ShiftSpec
from tta.models.retrieval import RetrievalModel
from tta.shifts import resolve_shift_device
from tta.shifts.video.mixed import is_mixed
from tta.utils.config import compose


@dataclass
class Scenario:
    """What a run evaluates: the direction, the shifts in stream order and the source model's provenance."""

    name: str
    task: str
    shifts: list[ShiftSpec]
    train_data: DictConfig
    checkpoint: str
    reset: str | None
    gallery: ShiftSpec = dataclasses.field(default_factory=ShiftSpec)  # ``gallery_shift=``: the configured one

    @classmethod
    def from_config(cls, cfg: DictConfig) -> Scenario:
        """The run's scenario; options that cannot work (a shift's missing weights, a dataset root that does not
        exist) are refused here, before any stage."""
        from tta.data.registry import check_root
        from tta.models.towers import EMBEDDED

        task = str(cfg.task)
        shifts = stream_shifts(cfg, query_side_of(task))
        train_data, checkpoint = train_data_config(cfg), str(cfg.scenario.get("checkpoint") or cfg.model.checkpoint)
        check_root(cfg.data)
        if checkpoint == "auto" and cfg.model.get("arch") == EMBEDDED:  # fine-tuned on train_data at first use
            check_root(train_data)
        return cls(name=str(cfg.scenario.name), task=task, shifts=shifts, train_data=train_data, checkpoint=checkpoint,
                   reset=cfg.scenario.get("reset"), gallery=configured_gallery_shift(cfg, query_side_of(task), shifts))

    @property
    def query_side(self) -> str:
        return query_side_of(self.task)

    @property
    def single(self) -> bool:
        """One shift (the paper's protocol) rather than a stream of shifts."""
        return len(self.shifts) == 1

    @property
    def shift(self) -> ShiftSpec:
        return self.shifts[0]

    @property
    def gallery_shift(self) -> ShiftSpec:
        """The shift the gallery gets: ``gallery_shift=`` when set, else a single shift of the gallery's modality,
        else none."""
        if self.gallery.name != "clean":
            return self.gallery
        side = "text" if self.query_side == "video" else "video"
        return self.shift if self.single and self.shift.kind == side else ShiftSpec()

    def shifted_side(self) -> str:
        if not self.single:
            return "query"
        kind = self.shift.kind
        if self.gallery.name != "clean":
            return "both" if kind == self.query_side else "gallery"
        return "none" if kind == "clean" else ("query" if kind == self.query_side else "gallery")

    def load_model(self, cfg: DictConfig, cache: Path) -> RetrievalModel:
        """The source model: fine-tuned on :attr:`train_data` (built on first use for the embedded model)."""
        from tta.synth.zoo import load_model

        return load_model(cfg.model, self.checkpoint, self.train_data, cache,
                          recipe=list(cfg.get("embedded_recipe") or []))


def query_side_of(task: str) -> str:
    return "video" if task == "v2t" else "text"


def query_task(shift_name: str) -> str:
    """The direction whose queries a shift perturbs: ``t2v`` for a text shift, ``v2t`` otherwise. tta.run registers
    it as the config resolver ``${tta_query_task:<shift name>}``, so one sweep can run video shifts on v2t and text
    shifts on t2v."""
    from tta.shifts import shift_kind

    try:
        return "t2v" if shift_kind(str(shift_name)) == "text" else "v2t"
    except KeyError:
        raise ValueError(f"unknown shift {shift_name!r}: no query direction") from None


def train_data_config(cfg: DictConfig) -> DictConfig:
    """The dataset the source model was fine-tuned on: ``data`` itself, or ``scenario.train_data`` (cross)."""
    name = cfg.scenario.get("train_data")
    if not name or name == cfg.data.name:
        return cfg.data
    from hydra.errors import HydraException

    overrides = [f"data={name}", *list(cfg.scenario.get("train_data_overrides") or [])]
    try:
        return compose("run", overrides).data
    except HydraException as e:
        raise ValueError(f"scenario.train_data={name!r} is not a dataset of conf/data/ (or its overrides "
                         f"{overrides[1:]} do not apply): {e}") from e


def stream_shifts(cfg: DictConfig, query_side: str) -> list[ShiftSpec]:
    """The shifts of the run: ``shift=`` alone, or the ``scenario.stream`` list ("name:severity" or mappings)."""
    stream = cfg.scenario.get("stream")
    if not stream:
        specs = [_checked(configured_shift(cfg, "shift"))]
    else:
        specs = [_stream_entry(entry, cfg, query_side) for entry in stream]
    from tta.data.workers import loader_workers

    setting = str((cfg.get("shift") or {}).get("device", "auto"))
    accelerator = str((cfg.get("trainer") or {}).get("accelerator", "auto"))
    workers = loader_workers(cfg.get("loader_workers", 0), setting, accelerator)
    device = str(resolve_shift_device(setting, accelerator, workers))
    return [dataclasses.replace(s, device=device) for s in specs]


def configured_shift(cfg: DictConfig, key: str) -> ShiftSpec:
    """The shift of the config node ``key`` (``shift`` or ``gallery_shift``); ``options.min_similarity`` becomes
    the spec's D_q filter instead of a shift option."""
    node = cfg.get(key) or {}
    options = node.get("options")
    options = OmegaConf.to_container(options, resolve=True) if options is not None else {}
    min_similarity = options.pop("min_similarity", None)
    return ShiftSpec(str(node.get("name", "clean")), int(node.get("severity", 0) or 0), shift_seed(cfg),
                     tuple(sorted(options.items())),
                     min_similarity=None if min_similarity is None else float(min_similarity))


def configured_gallery_shift(cfg: DictConfig, query_side: str, shifts: list[ShiftSpec]) -> ShiftSpec:
    """``gallery_shift=`` (Schiappa et al.'s multimodal shifts: the query and the gallery perturbed at once),
    checked against the direction and the query shift; clean when not set."""
    if not cfg.get("gallery_shift") or cfg.gallery_shift.get("name", "clean") == "clean":
        return ShiftSpec()
    spec = _checked(configured_shift(cfg, "gallery_shift"))
    gallery_side = "text" if query_side == "video" else "video"
    if spec.kind != gallery_side:
        raise ValueError(f"gallery_shift={spec.name} is a {spec.kind} shift, but the gallery of task={cfg.task} holds "
                         f"{gallery_side}s; choose a {gallery_side} shift (shift@gallery_shift=<name>)")
    if len(shifts) != 1:
        raise ValueError("gallery_shift applies to a single query shift, not to a scenario.stream; drop one of them")
    if shifts[0].kind not in ("clean", query_side):
        raise ValueError(f"shift={shifts[0].name} already shifts the gallery of task={cfg.task}; with gallery_shift, "
                         f"shift= must be a {query_side} (query) shift or clean")
    return dataclasses.replace(spec, device=shifts[0].device)


def _stream_entry(entry, cfg: DictConfig, query_side: str) -> ShiftSpec:
    if isinstance(entry, str):
        name, _, sev = entry.partition(":")
        options = {}
    else:
        entry = OmegaConf.to_container(entry, resolve=True) if OmegaConf.is_config(entry) else dict(entry)
        name, sev, options = entry.get("name", ""), entry.get("severity", 0), entry.get("options") or {}
        if "min_similarity" in options:
            raise ValueError(f"scenario.stream entry {entry!r}: options.min_similarity (the D_q filter) applies to a "
                             "single shift=, not to the entries of a stream")
    try:
        severity = int(sev or 0)
    except ValueError:
        raise ValueError(f"scenario.stream entry {entry!r}: the severity must be an integer ('name:severity')") from None
    spec = _checked(ShiftSpec(str(name).strip(), severity, shift_seed(cfg), tuple(sorted(options.items()))))
    if spec.kind not in ("clean", query_side):
        raise ValueError(f"scenario.stream entry {entry!r} is a {spec.kind} shift, but the queries of "
                         f"task={cfg.task} are {query_side}s; a stream shifts the query side only")
    return spec


def shift_seed(cfg: DictConfig) -> int:
    """Seed of the shift realisations: ``shift_seed``, or the run's ``seed`` when it is null."""
    value = cfg.get("shift_seed")
    return int(cfg.seed if value is None else value)


def _checked(shift: ShiftSpec) -> ShiftSpec:
    """Validate the shift's name (unknown names list the valid ones), severity and the options checked up front."""
    try:
        kind = shift.kind
    except KeyError as e:
        raise ValueError(str(e).strip('"')) from None
    if shift.min_similarity is not None and kind != "text":
        raise ValueError(f"options.min_similarity filters perturbed captions by their similarity to the clean ones, "
                         f"but shift {shift.name!r} is a {kind} shift; drop the option")
    if kind != "clean" and not is_mixed(shift.name):  # a mixed stream draws its severities per item
        from tta.shifts.registry import check_options, check_severity, get_shift

        check_severity(get_shift(shift.name), shift.severity)
        check_options(shift.name, dict(shift.options))
    return shift
