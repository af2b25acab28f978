"""The ``comp`` layout: tables of the VideoComp probe (results.json ``comp``, docs/methods/videocomp.md).

Two tables from the same runs (sweep directories or row files):

* the source probe, one row per source model (its backbone, embedded recipe and the model/data options it was
  built with) and probe: binary accuracy per disruption with its 95 % bootstrap interval over the probe's videos,
  the comprehensive score, R@1 (t2v) of the positives and the mean margins; read from ``task=comp`` runs and from
  the ``source`` block every ``comp_probe.enabled`` run scores beside its adapted model (the same model, so one row);
* after adaptation, per source: one row per (stream, adapter) with the stream's own R@1, the adapted model's probe
  and its paired difference to the source model (adapted − source, the same resampled videos for both).

A cell over several runs (seeds) shows the mean ± sd (n) and no interval: the intervals resample the probe's
videos only, not runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pandas as pd

from tta.reporting.labels import shift_label

#: the disruption types in table order, and their column names
TYPES = {"temp_reorder": "reorder", "action_replace": "action", "seg_mismatch": "seg"}
#: the interval text of a comp page (pages.py prints it instead of the paired per-query one)
HOW = ("Intervals are 95 % percentile bootstrap intervals over the probe's videos (the same resampled videos for the "
       "adapted and the source model, so Δ is paired); they carry no run-to-run noise (training, stream or probe "
       "seed). ▲/▼ mark a Δ whose interval lies above/below 0.")


@dataclass
class CompTable:
    """A table of formatted cells (values with their intervals), rendered like :class:`tta.reporting.table.Table`
    for the pages: ``to_markdown``, ``to_csv``, ``seed_values``, ``notes``."""

    title: str
    about: str
    header: list[str]
    rows: list[list[str]]
    seed_values: tuple = ()
    notes: list = field(default_factory=list)
    marks = None  # no paired per-query comparison (pages.py)
    how = HOW

    def to_markdown(self) -> str:
        lines = [f"**{self.title}** ({self.about})", "", "| " + " | ".join(self.header) + " |",
                 "|" + "---|" * len(self.header)] + ["| " + " | ".join(r) + " |" for r in self.rows]
        return "\n".join(lines + ([""] + [f"- {n}" for n in self.notes] if self.notes else []))

    def to_csv(self) -> str:
        return pd.DataFrame(self.rows, columns=self.header).to_csv(index=False)


def _source_label(src: dict, differ: list[str]) -> str:
    parts = [src.get("model") or "?"]
    if src.get("recipe"):
        parts.append("recipe [" + ", ".join(src["recipe"]) + "]")
    parts += [f"{k}={_short(src['options'][k])}" for k in differ if k in src.get("options", {})]
    if src.get("probe_overrides"):
        parts.append("probe [" + ", ".join(src["probe_overrides"]) + "]")
    return ", ".join(parts)


def _short(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _sources(blocks: list[dict]) -> list[str]:
    """A label per source description: the backbone, the recipe, the options that differ between the sources."""
    keys = {k for b in blocks for k in b.get("options", {})}
    differ = sorted(k for k in keys if len({json.dumps(b.get("options", {}).get(k)) for b in blocks}) > 1)
    return [_source_label(b, differ) for b in blocks]


def _value(values: list[float], ci: list | None, digits: int = 1) -> str:
    """One cell: a value with its interval (one run) or the mean ± sd (n) over runs."""
    values = [v for v in values if v is not None and v == v]
    if not values:
        return ""
    if len(values) == 1:
        return f"{values[0]:.{digits}f}" + (f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]" if ci else "")
    s = pd.Series(values)
    return f"{s.mean():.{digits}f} ± {s.std(ddof=1):.{digits}f} ({len(values)})"


def _delta(entries: list[dict]) -> str:
    """A paired difference: "+1.2 [−0.3, +2.7]" with ▲/▼ where the interval excludes 0; over runs mean ± sd (n)."""
    if not entries:
        return ""
    if len(entries) > 1:
        s = pd.Series([e["delta"] for e in entries])
        return f"{s.mean():+.1f} ± {s.std(ddof=1):.1f} ({len(entries)})"
    d, (lo, hi) = entries[0]["delta"], entries[0]["ci"]
    mark = " ▲" if lo > 0 else " ▼" if hi < 0 else ""
    return f"{d:+.1f} [{lo:+.1f}, {hi:+.1f}]{mark}".replace("-", "−")


def _margins(blocks: list[dict]) -> str:
    out = []
    for t in TYPES:
        vals = [1000 * b["margin"][t] for b in blocks if t in (b.get("margin") or {})]
        if vals:
            m = sum(vals) / len(vals)
            out.append(f"{m:.2f}" if abs(m) < 10 else f"{m:.1f}")
    return " / ".join(out)


def _probe_cells(blocks: list[dict]) -> list[str]:
    """reorder, action, seg, all (product), R@1 t2v and the margins of one or more probe results."""
    one = len(blocks) == 1
    cells = [_value([b["accuracy"].get(t) for b in blocks], (blocks[0].get("accuracy_ci") or {}).get(t) if one
                    else None) for t in TYPES]
    cells.append(_value([b["comprehensive"] for b in blocks], blocks[0].get("comprehensive_ci") if one else None))
    cells.append(_value([b.get("R@1_t2v") for b in blocks], None))
    cells.append(_margins(blocks))
    return cells


def comp_tables(df: pd.DataFrame, title: str | None = None) -> list[CompTable]:
    """The source-probe table and, per source, the after-adaptation table of the runs that carry a probe."""
    if "comp" not in df or not df["comp"].map(lambda c: isinstance(c, dict)).any():
        raise ValueError("no run here carries a VideoComp probe (results.json 'comp'): run task=comp or a stream "
                         "with comp_probe.enabled=true")
    runs = df[df["comp"].map(lambda c: isinstance(c, dict))].copy()
    described = [dict(c.get("source_model") or {}, model=(c.get("source_model") or {}).get("model") or m)
                 for c, m in zip(runs["comp"], runs["model"], strict=True)]
    runs["source_label"] = _sources(described)
    runs["probe_key"] = [json.dumps([c.get("data"), c.get("seed")]) for c in runs["comp"]]
    prefix = f"{title}: " if title else ""
    seeds = tuple(sorted({int(s) for s in runs["seed"].dropna()}))
    tables = [_source_table(runs, prefix, seeds)]
    streams = runs[runs["task"] != "comp"]
    for label, part in streams.groupby("source_label", sort=False):
        tables.append(_stream_table(part, label, prefix, seeds))
    return tables


def _source_table(runs: pd.DataFrame, prefix: str, seeds: tuple) -> CompTable:
    header = ["source model", "probe", "videos", *TYPES.values(), "all (product)", "R@1 t2v",
              "margins ×10⁻³ (" + " / ".join(TYPES.values()) + ")"]
    rows, notes = [], []
    for (label, _), part in runs.groupby(["source_label", "probe_key"], sort=False):
        # one source model scored on one probe is identical in every run that scores it (task=comp, or beside
        # a stream): one result per distinct set of weights; several weights (training seeds) are its repeats
        results: dict = {}
        for w, c in zip(part["source_weights"], part["comp"], strict=True):
            block = c["source"]
            results.setdefault(json.dumps([block["accuracy"], block.get("margin")], sort_keys=True), []).append(
                (None if w is None or w != w else str(w), block))
        blocks = [found[0][1] for found in results.values()]
        weights = [{w for w, _ in found} - {None} for found in results.values()]
        if len(blocks) > 1 and any(not w for w in weights) or len(set().union(*weights)) < len(blocks):
            notes.append(f"{label}: {len(blocks)} different source probes from {len(set().union(*weights))} "
                         f"recorded source weights; shown as repeats")
        first = part["comp"].iloc[0]
        probe = f"{first.get('data')} (seed {first.get('seed')})"
        n = blocks[0].get("n_videos")
        rows.append([label, probe, "" if n is None else str(n), *_probe_cells(blocks)])
    about = ("binary accuracy %, chance 50; all: the product of the three, chance 12.5; R@1 t2v of the probe's "
             "positive pairs; margins: mean sim(positive) − sim(negative); one source model per row (several "
             "weights: mean ± sd (n))")
    return CompTable(f"{prefix}VideoComp probe of the source models", about, header, rows, seeds, notes)


def _stream_table(part: pd.DataFrame, label: str, prefix: str, seeds: tuple) -> CompTable:
    header = ["stream", "adapter", "stream R@1", *TYPES.values(), "all", "probe R@1 t2v",
              *(f"Δ {t}" for t in TYPES.values()), "Δ all", "margins ×10⁻³"]
    part = part.assign(stream=[f"{t} {shift_label(s, v)}" for t, s, v in
                               zip(part["task"], part["shift"], part["severity"], strict=True)])
    part = part.sort_values(["task", "shift", "severity", "adapter_rank", "config"], ascending=[False, True, True,
                                                                                                  True, True],
                            kind="stable")
    rows, seen = [], set()
    for (stream, config), cell in part.groupby(["stream", "config"], sort=False):
        comps = list(cell["comp"])
        adapted = [c["adapted"] for c in comps]
        diffs = {t: [c["difference"][t] for c in comps if t in (c.get("difference") or {})]
                 for t in (*TYPES, "comprehensive")}
        r1 = [float(v) for v in cell["R@1"] if v is not None and v == v]
        shown = stream not in seen
        seen.add(stream)
        rows.append([stream if shown else "", config, _value(r1, None), *_probe_cells(adapted)[:5],
                     *(_delta(diffs[t]) for t in (*TYPES, "comprehensive")), _probe_cells(adapted)[5]])
    about = ("stream R@1: the shifted stream's own retrieval; the probe columns: the adapted model as the stream "
             "left it, binary accuracy % with its interval; Δ: adapted − source model, paired")
    return CompTable(f"{prefix}after adaptation, source {label}", about, header, rows, seeds)
