"""Score the VideoComp probe with a model (Sec. 3.4): binary accuracy per disruption, comprehensive score, R@1.

The triplets are drawn once from ``comp_probe.seed`` (:func:`build_triplets`), so every model scored on the same
items sees the same disrupted texts and crops. ``task=comp`` scores the source model alone; ``comp_probe.enabled``
scores the adapted model at the end of a run's stream beside a fresh copy of the source model
(docs/methods/videocomp.md).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from tta.comp.disrupt import DISRUPTIONS, CompItem, action_replace, positive_text, seg_mismatch, temp_reorder
from tta.comp.metrics import binary_accuracy, comprehensive_score
from tta.models.retrieval import RetrievalModel

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Span:
    """A clip to encode: a video file, its duration and the time span of it that is shown."""

    path: str
    duration: float
    start: float
    end: float


@dataclass
class Triplets:
    """Per disruption type, (clip index, positive text, negative text) triplets over ``clips``."""

    items: list[CompItem]
    clips: list[Span] = field(default_factory=list)
    rows: dict[str, list[tuple[int, str, str]]] = field(default_factory=lambda: {d: [] for d in DISRUPTIONS})
    owners: list[int] = field(default_factory=list)  # the item (video) each clip is cut from

    def owner_of_rows(self) -> dict[str, list[int]]:
        """Per disruption type, the video of each triplet (what the bootstrap resamples)."""
        return {name: [self.owners[r[0]] for r in rows] for name, rows in self.rows.items() if rows}


def build_triplets(items: list[CompItem], seed: int) -> Triplets:
    """The probe's triplets: clip i < len(items) is video i whole; seg-mismatch crops follow."""
    rng = np.random.default_rng(seed)
    out = Triplets(items, [Span(it.video_path, it.duration, 0.0, it.duration) for it in items],
                   owners=list(range(len(items))))
    for i, item in enumerate(items):
        positive = positive_text(item)
        for name, disrupt in (("temp_reorder", temp_reorder), ("action_replace", action_replace)):
            if (negative := disrupt(item, rng)) is not None:
                out.rows[name].append((i, positive, negative))
        if (crops := seg_mismatch(item, rng)) is not None:
            one, two = crops
            for own, other in ((one, two), (two, one)):
                out.clips.append(Span(item.video_path, item.duration, own.start, own.end))
                out.owners.append(i)
                out.rows["seg_mismatch"].append((len(out.clips) - 1, own.text, other.text))
    return out


def span_indices(count: int, span: Span, n: int) -> list[int]:
    """``n`` uniform frame indices of the frames inside the span (the MLVP rule on the cropped range)."""
    from tta.media.frames import uniform_frame_indices

    first = min(count - 1, max(0, int(span.start / span.duration * count)))
    stop = min(count, max(first + 1, round(span.end / span.duration * count)))
    return [first + j for j in uniform_frame_indices(stop - first, n)]


class SpanLoader:
    """Normalised (n, 3, S, S) frames of clip i (picklable for loader workers)."""

    def __init__(self, clips: list[Span], num_frames: int, image_size: int):
        self.clips, self.num_frames, self.image_size = clips, num_frames, image_size

    def __call__(self, i: int) -> torch.Tensor:
        from tta.media.transforms import clip_transform
        from tta.media.video import read_frames, video_frame_count

        span = self.clips[i]
        indices = span_indices(video_frame_count(span.path), span, self.num_frames)
        return clip_transform(read_frames(span.path, indices), self.image_size)


@torch.no_grad()
def pair_scores(model: RetrievalModel, text: torch.Tensor, video: torch.Tensor, chunk: int = 64) -> torch.Tensor:
    """sim(text_i, video_i) for every row i (the head's own similarity, chunked)."""
    return torch.cat([model.text_video_similarity(text[i:i + chunk], video[i:i + chunk]).diagonal()
                      for i in range(0, len(text), chunk)])


@torch.no_grad()
def score_probe(model: RetrievalModel, triplets: Triplets, num_frames: int, workers: int = 0) -> dict[str, Any]:
    """The probe's metrics for one model: accuracy and triplet count per type, comprehensive score, R@1."""
    from tta.metrics import retrieval_metrics
    from tta.models.encode import EncodeSetting, encode_texts, encode_videos, pairwise_similarity

    model.eval()
    device = next(model.parameters()).device  # where the model is (an adapted model stays where it streamed)
    setting = EncodeSetting(device=str(device), workers=workers)
    video = encode_videos(model, SpanLoader(triplets.clips, num_frames, model.image_size), len(triplets.clips),
                          setting=setting).to(device)
    accuracy, counts, margin, outcomes = {}, {}, {}, {}
    for name, rows in triplets.rows.items():
        if not rows:
            continue
        clips = video[torch.tensor([r[0] for r in rows], device=video.device)]
        pos = pair_scores(model, encode_texts(model, [r[1] for r in rows], setting=setting).to(device), clips)
        neg = pair_scores(model, encode_texts(model, [r[2] for r in rows], setting=setting).to(device), clips)
        accuracy[name], counts[name] = binary_accuracy(pos, neg), len(rows)
        outcomes[name] = (pos > neg).int().tolist()  # per triplet, in row order (what the intervals resample)
        margin[name] = float((pos - neg).mean())
    n = len(triplets.items)
    text = encode_texts(model, [positive_text(it) for it in triplets.items], setting=setting).to(device)
    t2v = pairwise_similarity(model, text, video[:n]).cpu()
    gt = torch.arange(n)
    # percent, like the retrieval metrics (the paper's tables)
    return {"accuracy": {k: 100 * v for k, v in accuracy.items()}, "triplets": counts, "margin": margin,
            "outcomes": outcomes,
            "comprehensive": 100 * comprehensive_score(accuracy), "chance_comprehensive": 100 * 0.5 ** len(accuracy),
            "R@1_t2v": retrieval_metrics(t2v, gt)["R@1"],
            "R@1_v2t": retrieval_metrics(t2v.t(), gt)["R@1"], "n_videos": n}


def probe_data_config(cfg: DictConfig) -> DictConfig:
    """The data config named by ``comp_probe.data`` with ``comp_probe.data_overrides`` (Hydra overrides).

    When it names the run's own dataset, the run's data options hold for the probe too (a source trained on
    ``data.synth.recolour_events=true`` is probed on those clips), and the probe's overrides change what they name.
    """
    from hydra.errors import HydraException

    from tta.utils.config import compose

    node = cfg.comp_probe
    overrides = [f"data={node.data}", *list(node.get("data_overrides") or [])]
    try:
        probe = compose("run", overrides).data
        if node.data != cfg.data.get("name"):
            return probe
        default = compose("run", overrides[:1]).data
    except HydraException as e:
        raise ValueError(f"comp_probe.data={node.data!r} is not a dataset of conf/data/ (or its overrides "
                         f"{overrides[1:]} do not apply): {e}") from e
    run_data = OmegaConf.to_container(cfg.data, resolve=True)
    changed = _changed(OmegaConf.to_container(default, resolve=True), OmegaConf.to_container(probe, resolve=True))
    return OmegaConf.merge(run_data, changed)


def _changed(default: dict, overridden: dict) -> dict:
    """The keys (nested) whose values ``overridden`` changes from ``default``."""
    out = {}
    for key, value in overridden.items():
        before = default.get(key)
        if isinstance(value, dict) and isinstance(before, dict):
            if sub := _changed(before, value):
                out[key] = sub
        elif key not in default or before != value:
            out[key] = value
    return out


def probe_triplets(cfg: DictConfig, cache: Path) -> tuple[Triplets, int, str]:
    """(triplets, frames per clip, dataset name) of the configured probe."""
    from tta.comp.items import load_comp_items

    data_cfg = probe_data_config(cfg)
    items = load_comp_items(data_cfg, str(data_cfg.split), cache)[: cfg.comp_probe.get("subset") or None]
    if len(items) < 2:
        raise ValueError(f"comp_probe.data={data_cfg.name} has {len(items)} video(s) with two or more events; the "
                         f"probe needs at least two (raise comp_probe.subset or choose another dataset)")
    return build_triplets(items, int(cfg.comp_probe.seed)), int(data_cfg.num_frames), str(data_cfg.name)


def probe_models(cfg: DictConfig, cache: Path, models: dict[str, RetrievalModel]) -> dict[str, Any]:
    """The probe scored with each named model (results.json ``comp``)."""
    from tta.comp.items import ALTERNATIVE_COUNTS

    ALTERNATIVE_COUNTS.update(candidates=0, dropped=0)
    triplets, num_frames, name = probe_triplets(cfg, cache)
    out: dict[str, Any] = {"data": name, "seed": int(cfg.comp_probe.seed)}
    if ALTERNATIVE_COUNTS["candidates"]:  # ActivityNet: replacement verbs dropped by the grammar check
        out["action_candidates"] = {**ALTERNATIVE_COUNTS, "share_dropped":
                                    ALTERNATIVE_COUNTS["dropped"] / ALTERNATIVE_COUNTS["candidates"]}
        log.info("VideoComp probe: %(dropped)d of %(candidates)d action replacements dropped as ungrammatical",
                 ALTERNATIVE_COUNTS)
    for role, model in models.items():
        out[role] = score_probe(model, triplets, num_frames)
        log.info("VideoComp probe (%s model, %s): %s", role, name, json.dumps(out[role]["accuracy"]))
    add_intervals(out, triplets, list(models))
    return out


def add_intervals(out: dict[str, Any], triplets: Triplets, roles: list[str]) -> None:
    """95 % bootstrap intervals over the probe's videos in place: each role's ``accuracy_ci`` and
    ``comprehensive_ci``, and with two roles the paired ``difference`` (adapted − source)."""
    from tta.comp.metrics import bootstrap_probe

    boot = bootstrap_probe({r: out[r]["outcomes"] for r in roles}, triplets.owner_of_rows(), len(triplets.items))
    for role in roles:
        out[role].update(boot[role])
    if "difference" in boot:
        out["difference"] = boot["difference"]


class ProbeAfterStream(L.Callback):
    """``comp_probe.enabled``: the probe scored with the adapted model as the stream left it, beside a fresh source
    model (``load_source()``), as the record's ``comp`` field."""

    def __init__(self, cfg: DictConfig, cache: Path, load_source):
        self.cfg, self.cache, self.load_source = cfg, cache, load_source

    def record_fields(self, adapter) -> dict[str, Any]:
        return {"comp": probe_models(self.cfg, self.cache, {"adapted": adapter.model, "source": self.load_source()})}


def probe_source(cfg: DictConfig, scenario, cache: Path, t_start: float) -> dict:
    """The record of ``task=comp``: the probe scored with the source model alone (``tta.run.without_stream``
    writes it to ``results.json``)."""
    from tta.results import provenance

    if cfg.adapter.name != "source" or cfg.shift.name != "clean" or cfg.scenario.get("stream"):
        raise ValueError(f"task=comp scores the source model alone (got adapter={cfg.adapter.name}, "
                         f"shift={cfg.shift.name}); to probe an adapted model run task=v2t or task=t2v with "
                         f"comp_probe.enabled=true")
    from tta.data.gallery import weights_digest

    model = scenario.load_model(cfg, cache)
    return {"task": "comp", "model": cfg.model.name, "data": cfg.data.name,
            "source_weights": weights_digest(model)[:16],  # pairs it with the streams' source (tta.report)
            "comp": probe_models(cfg, cache, {"source": model}),
            "config": OmegaConf.to_container(cfg, resolve=True), "provenance": provenance(cfg, t_start)}


def print_comp(comp: dict[str, Any]) -> None:
    """A rich table of the probe: one row per scored model."""
    from rich.console import Console
    from rich.table import Table

    roles = [r for r in ("adapted", "source") if r in comp]
    table = Table(title=f"VideoComp probe on {comp['data']} (binary accuracy %, chance 50; 95 % bootstrap interval "
                        f"over videos)")
    for column in ("model", "reorder", "action", "seg", "all (product)", "R@1 t2v"):
        table.add_column(column, justify="right")
    def cell(value: float, ci: list[float] | None) -> str:
        return f"{value:.1f}" + (f" [{ci[0]:.1f}, {ci[1]:.1f}]" if ci else "")

    for role in roles:
        r = comp[role]
        cis = r.get("accuracy_ci") or {}
        table.add_row(role, *(cell(r["accuracy"][d], cis.get(d)) if d in r["accuracy"] else "-" for d in DISRUPTIONS),
                      cell(r["comprehensive"], r.get("comprehensive_ci")), f"{r['R@1_t2v']:.1f}")
    Console().print(table)
