"""Collect runs into one frame, one row per run, from either source of results:

* a sweep (or any directory tree): one row per complete results.json (:func:`load_sweep`);
* committed row files (``*.jsonl``, docs/results/rows/): one JSON object per line, as the earlier table runner
  wrote them (:func:`load_rows`).

Both give the same columns, so every table layout of :mod:`tta.reporting` renders either (:func:`load_runs`).
"""

from __future__ import annotations

import functools
import json
import logging
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from tta.reporting.compare import QueryRanks
from tta.reporting.labels import shift_label, shifted_side

log = logging.getLogger(__name__)

#: the one adapter order of every table: the paper's (HAT-VTR Tables 1-3: source, the entropy baselines, TCR), the
#: score-refinement methods, HAT-VTR last; adapters not listed follow alphabetically
ADAPTER_ORDER = ("source", "tent", "read", "sar", "eata", "tcr", "hsm", "qbnorm", "dsl", "hatvtr")
LEVEL_ORDER = ("clean", "low", "mid", "high", "character", "word", "sentence", "stream")


class Cell(NamedTuple):
    """What makes two runs the same cell of a table: runs that differ only in seed (and shift_seed) are its repeats.
    The rest of a run's configuration is part of its identity too (:func:`separate_cells`): runs of other query
    counts or source weights get their own ``data`` label, other settings their own ``config`` label, so these
    fields suffice. Comparisons are keyed by it; read its fields by name."""

    data: str
    task: str
    scenario: str
    train_data: str | None
    protocol: str | None
    model: str
    config: str
    shift: str
    severity: int
    gallery_shift: str | None


CELL = Cell._fields  # the run-frame columns of a cell, in Cell's order
#: config keys (top level, or a dotted prefix) that never make two runs different cells: the seeds (a cell's repeats
#: differ in them), where files go and how many workers decode (besides :data:`tta.results.identity.NOT_IDENTITY`)
NOT_SETUP = ("seed", "shift_seed", "paths", "data.workers")
FROM, OVERRIDES = "(recorded as)", "overrides"  # run_setup: what a setup was read from
#: what a run records about its shift (results.json consistency, input_change, query_filter; docs/outputs.md)
EFFECT = ("top1_unchanged", "top5_overlap", "input_distance", "changed_share", "filtered_share")
#: the cost columns of a run (results.json "cost"; ms_per_query from time_s): :func:`cost_fields`
COST = ("ms_per_query", "method_share", "stream_share", "peak_rss_mb", "peak_gpu_mb")
#: what refining methods (HSM-based adapters, post-hoc refiners) also record before refinement: "<metric> raw"
RAW = ("R@1", "skewness")


def rsum(metrics: dict) -> float | None:
    """RSUM = R@1 + R@5 + R@10 (Qiu et al., Sec. 3; one direction here), or None when one of them is missing."""
    vals = [metrics.get(k) for k in ("R@1", "R@5", "R@10")]
    return None if any(v is None for v in vals) else float(sum(vals))


def shift_level(name: str) -> str:
    """MLVP level (low/mid/high) or text level (character/word/sentence) of a shift, from the registry."""
    if name in ("clean", "stream"):
        return name
    from tta.shifts.registry import get_shift

    try:
        return get_shift(name).level
    except KeyError:
        return "other"


def sides_label(part: pd.DataFrame) -> str:
    """The shifted sides of a table's runs, for its title: "query shift", "gallery shift" or "query and gallery
    shift" (some runs shift both, or some one side and some the other); "" when every run is clean."""
    gallery = part["gallery_shift"] if "gallery_shift" in part else pd.Series("none", index=part.index)
    sides = {shifted_side(s, t, g) for s, t, g in zip(part["shift"], part["task"], gallery, strict=True)}
    sides = {x for side in sides for x in side.split(" and ") if x in ("query", "gallery")}
    return " and ".join(x for x in ("query", "gallery") if x in sides) + " shift" if sides else ""


def level_label(level: str) -> str:
    """The header of a shift-level group: HAT-VTR's "low-level" (etc.) shift types, not a severity."""
    return level if level in ("clean", "stream", "mean", "other", "") else f"{level}-level"


def _ranks(df: pd.DataFrame) -> pd.DataFrame:
    df["adapter_rank"] = df["adapter"].map(lambda a: ADAPTER_ORDER.index(a) if a in ADAPTER_ORDER else len(ADAPTER_ORDER))
    df["level_rank"] = df["level"].map(lambda lv: LEVEL_ORDER.index(lv) if lv in LEVEL_ORDER else len(LEVEL_ORDER))
    return df


def load_sweep(root: str | Path, segments: bool = False) -> tuple[pd.DataFrame, list[dict]]:
    """All complete runs under ``root`` and the failed jobs (``error.txt`` without results.json).

    With ``segments`` a continual stream gives one row per shift of the stream instead of its "stream" row, with
    that shift's metrics and its queries' ranks (so each shift gets its own paired interval).

    Returns:
        (runs, failures): ``runs`` has one row per results.json with the identity columns (data, task, scenario,
        model, adapter, posthoc, shift, level, severity, seed, protocol; a multi-caption run's data reads
        "<data> (multi-caption)"), the metrics (R@1, R@5, R@10, R@50, MdR, MnR,
        skewness, ...) and ``dir``; ``failures`` lists {dir, error} of jobs that failed.
    """
    root = Path(root)
    if not root.exists():
        raise FileNotFoundError(f"{root} does not exist; give the directory of a sweep (outputs/sweeps/<time>) or "
                                f"of single runs (outputs/runs)")
    rows, failures = [], []
    for file in sorted(root.rglob("results.json")):
        try:
            res = json.loads(file.read_text())
        except json.JSONDecodeError:
            log.warning("skipping unreadable %s", file)
            continue
        if res.get("task") == "comp":  # the VideoComp probe alone: no stream, no retrieval metrics
            rows.append(probe_only_row(res, str(file.parent)))
            continue
        row = run_row(res, file.parent)
        rows += _split_stream(row, res) if segments and row["segments"] else [row]
    for err in sorted(root.rglob("error.txt")):
        if not (err.parent / "results.json").exists():
            failures.append({"dir": str(err.parent), "error": err.read_text().strip().splitlines()[-1:]})
    if not rows:
        raise ValueError(f"no results.json under {root}: no run finished there (failed jobs: {len(failures)})")
    return _finish(pd.DataFrame(rows)), failures


def run_row(res: dict, run_dir: Path) -> dict:
    """The row of one stream run's results.json (identity columns, metrics, cost, per-query ranks)."""
    row = {k: res.get(k) for k in ("data", "task", "scenario", "model", "adapter", "posthoc", "shift",
                                   "severity", "seed", "shift_seed", "train_data", "num_queries")}
    row["scenario"] = row["scenario"] or "qs"
    if row["shift"] == "clean":  # the severity of a clean run is meaningless (a sweep may still set one)
        row["severity"] = 0
    row["config"] = row["adapter"] if row["posthoc"] in (None, "none") else f"{row['adapter']}+{row['posthoc']}"
    row["protocol"] = (res.get("evaluation") or {}).get("protocol", "one_to_one")
    if row["protocol"] == "multi_caption":  # never averaged with the 1:1 runs of the same dataset
        row["data"] = f"{row['data']} (multi-caption)"
    row["level"] = shift_level(res["shift"])
    row.update(res["retrieval"])
    row["RSUM"] = rsum(res["retrieval"])
    row.update({k: v for k, v in res["hubness"].items() if k != "k"})
    row["hubness_k"] = res["hubness"].get("k")
    if res.get("retrieval_raw"):  # refining methods: the metrics before score refinement
        row.update({f"{k} raw": v for k, v in res["retrieval_raw"].items()})
        row["skewness raw"] = (res.get("hubness_raw") or {}).get("skewness")
    cost = res.get("cost") or {}
    row["ms_per_query"] = cost.get("ms_per_query", res["time_s"]["per_query_ms"])
    row.update(cost_fields(cost, res["time_s"]))
    row["failed_rows"] = int(res.get("failed_rows") or 0)
    row["queries"] = QueryRanks.load(run_dir)
    row["skipped"] = int((res.get("skipped") or {}).get("n", 0))  # bad input pairs left out of the metrics
    row["collapsed"] = bool((res.get("collapse") or {}).get("collapsed", False))
    row["dir"] = str(run_dir)
    row["source_weights"] = res.get("source_weights")
    row["setup"] = json.dumps(run_setup(res.get("config") or {}), sort_keys=True)
    row.update(effect_columns(res))
    row.update(provenance_columns(res.get("provenance") or {}))
    row["segments"] = stream_segments(res.get("segments"), row["queries"])
    if res.get("comp"):  # the VideoComp probe after the stream (the comp layout)
        row["comp"] = comp_record(res)
    return row


def _split_stream(row: dict, res: dict) -> list[dict]:
    """One row per shift of a continual stream's ``row``; the whole stream's own numbers (R@50, MdR, the other
    hubness measures, cost) do not describe one shift and are left empty."""
    whole = dict.fromkeys([*res["retrieval"], *res["hubness"], "RSUM", "ms_per_query", "neg_share",
                           *(f"{k} raw" for k in RAW)])
    return [{**row, **whole, **part, "level": shift_level(part["shift"]), "segments": None}
            for part in row["segments"]]


def stream_segments(segments: list[dict] | None, queries: QueryRanks | None) -> list[dict] | None:
    """The shifts of a continual stream (results.json "segments") as flat metric rows: shift, severity, R@1, R@5,
    R@10, skewness and the shift's own query ranks (None where the run recorded no per-query segment)."""
    if not segments:
        return None
    out = []
    for i, g in enumerate(segments):
        part = queries.select(queries.segment == i) if queries is not None and queries.segment is not None else None
        out.append({"shift": g["shift"], "severity": 0 if g["shift"] == "clean" else int(g["severity"]),
                    "R@1": g["retrieval"]["R@1"], "R@5": g["retrieval"].get("R@5"),
                    "R@10": g["retrieval"].get("R@10"), "skewness": (g.get("hubness") or {}).get("skewness"),
                    "queries": part if part is not None and len(part.rank) else None})
    return out


def _finish(df: pd.DataFrame) -> pd.DataFrame:
    return _ranks(separate_cells(complete_columns(df)))


def complete_columns(df: pd.DataFrame) -> pd.DataFrame:
    """The run frame with every column the tables read (older results, rows and hand-made frames lack some):
    config = adapter, one_to_one protocol, no per-query ranks, no failed rows, unknown cost."""
    df = df.copy()
    defaults = {"config": None, "protocol": "one_to_one", "train_data": None, "shift_seed": None, "failed_rows": 0,
                "queries": None, "segments": None, "RSUM": None, "gallery_shift": "none", "by_category": None, "source_weights": None, "comp": None,
                "num_queries": None, "setup": None, "repeats": 1, "deterministic": False, "hubness_k": None,
                **{f"{k} raw": None for k in RAW},
                **dict.fromkeys(COST),
                **dict.fromkeys(EFFECT)}
    for col, value in defaults.items():
        if col not in df:
            df[col] = value
    if all(k in df for k in ("R@1", "R@5", "R@10")):
        df["RSUM"] = df["RSUM"].where(df["RSUM"].notna(), df["R@1"] + df["R@5"] + df["R@10"])
    df["config"] = df["config"].where(df["config"].notna(), df["adapter"])
    df["shift_seed"] = df["shift_seed"].where(df["shift_seed"].notna(), df["seed"])
    df["failed_rows"] = df["failed_rows"].fillna(0).astype(int)
    df["queries"] = df["queries"].astype(object).where(df["queries"].notna(), None)
    return df


def run_setup(config: dict, overrides: bool = False) -> dict:
    """Everything a run was configured with that may change its outcome, as flat {dotted key: value}: the
    resolved config of results.json, or a row's Hydra overrides (``overrides``), without the seeds and the keys
    that change no outcome (:data:`NOT_SETUP`, :data:`tta.results.identity.NOT_IDENTITY`). A clean shift's severity
    is no setting: a sweep crossing ``clean`` with severities repeats one configuration under several names."""
    from tta.results.identity import NOT_IDENTITY

    flat = dict(config) if overrides else _flatten(config)
    out = {FROM: OVERRIDES if overrides else "config"}
    for key, value in flat.items():
        if _dropped(key, (*NOT_SETUP, *NOT_IDENTITY)):
            continue
        side, _, name = key.partition(".")
        if name == "severity" and str(flat.get(side, flat.get(f"{side}.name"))) == "clean":
            continue
        out[key] = _plain(value)
    return out


def _dropped(key: str, keys) -> bool:
    """Whether a dotted ``key`` is one of ``keys`` or below one of them."""
    return any(key == k or key.startswith(f"{k}.") for k in keys)


def _flatten(tree: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in tree.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _plain(value):
    """One form for a value from a config and from an override ("3e-5" and 3e-05 are one learning rate)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return json.dumps(value)
    if str(value).lower() in ("true", "false", "null", "none"):
        return {"true": True, "false": False}.get(str(value).lower())
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


def separate_cells(df: pd.DataFrame) -> pd.DataFrame:
    """Make :data:`CELL` one configuration: runs that differ in anything but the seed are never pooled.

    * Runs of one (data, task, scenario) over different query counts, and runs of one backbone from different
      source weights, are different experiments: their ``data`` reads "<data> (100 queries)" or
      "<data> (weights 1a2b3c4d)" (separate tables). An unrecorded count or digest does not split (unknown is
      not a difference).
    * Runs of one cell that differ in another setting (:func:`run_setup`; an adapter's learning rate, a data
      option) get it in their ``config`` label: "hatvtr (adapter.method.lr=3e-05)". Keys that only one of them
      records are not compared.
    * Runs of one cell at one seed are one run repeated (``clean`` swept with severities 1/3/5): the last is
      kept, ``repeats`` counts them.
    * ``deterministic``: the cell's runs give identical per-query ranks (identical R@1, R@5, R@10 and skewness
      where ranks are not recorded) over two seeds or more, or its stream is clean and was repeated: nothing in it
      is drawn at random, and tables show it once, marked, instead of "± 0.0 (3)".
    """
    if df.empty:
        return df
    df = df.copy()
    df["num_queries"] = [None if pd.isna(v) else int(v) for v in df["num_queries"]]
    df["data"] = _split_label(df, ["data", "task", "scenario", "protocol"], "num_queries",
                              lambda v: f"{v:,} queries")
    df["data"] = _split_label(df, ["data", "task", "scenario", "protocol", "train_data", "model"], "source_weights",
                              lambda v: f"weights {str(v)[:8]}")
    df["shift"] = _shift_option_labels(df)
    df["config"] = _setup_labels(df)
    cell = [c for c in CELL if c in df]
    key = df[cell].astype(str).agg("|".join, axis=1)
    run = key + "|" + df["seed"].astype(str) + "|" + df["shift_seed"].astype(str)
    df["repeats"] = run.map(run.value_counts())
    df = df[~run.duplicated(keep="last")].copy()
    key = key[df.index]
    det = {k: _identical(g) for k, g in df.groupby(key, sort=False)}
    df["deterministic"] = key.map(det).astype(bool)
    return df.reset_index(drop=True)


def _split_label(df: pd.DataFrame, within: list[str], column: str, name) -> pd.Series:
    """``data`` with "(name(value))" where the runs of one ``within`` group hold several recorded ``column`` values."""
    label = df["data"].copy()
    for _, g in df.groupby([c for c in within if c in df], dropna=False, sort=False):
        values = g[column].dropna()
        if values.nunique() > 1:
            for i, v in g[column].items():
                if pd.notna(v):
                    label[i] = f"{label[i]} ({name(v)})"
    return label


SHIFT_OPTIONS = "shift.options."  # a shift's options: part of the stream every method of a cell sees


def _shift_option_labels(df: pd.DataFrame) -> pd.Series:
    """``shift`` with the options that tell apart otherwise alike streams: "mixed_types (ratio=0.4)". They label the
    shift, not the method, so that the methods run on one stream stay one cell's columns and pair."""
    label = df["shift"].copy()
    if "setup" not in df:
        return label
    for _, g in df.groupby([c for c in CELL if c in df and c != "config"], dropna=False, sort=False):
        setups = {i: json.loads(s) for i, s in g["setup"].items() if isinstance(s, str)}
        keys = sorted({k for s in setups.values() for k in s if k.startswith(SHIFT_OPTIONS)})
        differ = [k for k in keys if len({json.dumps(s.get(k, "default")) for s in setups.values()}) > 1]
        for i, s in setups.items():
            shown = [f"{k[len(SHIFT_OPTIONS):]}={_short(s[k])}" for k in differ if k in s]
            if shown:
                label[i] = f"{label[i]} ({', '.join(shown)})"
    return label


def _setup_labels(df: pd.DataFrame) -> pd.Series:
    """``config`` with the settings that tell apart runs of one cell otherwise (see :func:`separate_cells`)."""
    label = df["config"].copy()
    cell = [c for c in CELL if c in df]
    for _, g in df.groupby(cell, dropna=False, sort=False):
        setups = {i: json.loads(s) for i, s in g["setup"].items() if isinstance(s, str)}
        if len({json.dumps(s, sort_keys=True) for s in setups.values()}) < 2:
            continue
        keys = sorted(k for s in setups.values() for k in s if k != FROM and not k.startswith(SHIFT_OPTIONS))
        # an override a row does not set is the default (a difference); a key missing from another kind of
        # record is unknown (no difference)
        kinds = {s.get(FROM) for s in setups.values()}
        default = kinds == {OVERRIDES}
        differ = [k for k in dict.fromkeys(keys) if len({json.dumps(s.get(k, "default")) for s in setups.values()
                                           if default or k in s}) > 1]
        for i, s in setups.items():
            shown = [f"{k}={_short(s[k])}" for k in differ if k in s]
            if shown:
                label[i] = f"{label[i]} ({', '.join(shown[:3])}{', ...' if len(shown) > 3 else ''})"
    return label


def _short(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _identical(cell: pd.DataFrame) -> bool:
    """Whether a cell's runs show that its stream draws nothing at random (see :func:`separate_cells`)."""
    seeds = cell["seed"].nunique() + cell["shift_seed"].nunique() - 1
    clean = (cell["shift"] == "clean").all() and (cell["gallery_shift"].fillna("none") == "none").all()
    if not (seeds > 1 or (clean and int(cell["repeats"].max()) > 1)):
        return False
    runs = list(cell["queries"])
    if all(isinstance(q, QueryRanks) for q in runs):
        first = runs[0]
        return all(np.array_equal(q.rank, first.rank) and np.array_equal(q.failed, first.failed) for q in runs[1:])
    metrics = [m for m in ("R@1", "R@5", "R@10", "skewness") if m in cell]
    vals = cell[metrics].astype(float)
    return bool(vals.notna().all().all() and (vals.nunique() == 1).all())


def effect_columns(res: dict) -> dict:
    """The :data:`EFFECT` columns of a results.json (None where not recorded), its ``gallery_shift`` label ("none"
    without one) and its ``by_category`` metrics."""
    cons = res.get("consistency") or {}
    query = (res.get("input_change") or {}).get("query") or {}
    g = res.get("gallery_shift")
    return {"top1_unchanged": cons.get("top1_unchanged"), "top5_overlap": cons.get("top5_overlap"),
            "input_distance": query.get("distance_mean"), "changed_share": query.get("changed_share"),
            "filtered_share": (res.get("query_filter") or {}).get("filtered_share"),
            "gallery_shift": shift_label(g["name"], g["severity"]) if g else "none",
            "by_category": res.get("by_category")}


def provenance_columns(prov: dict) -> dict:
    """The columns a report prints per table from results.json ``provenance`` (None where not recorded)."""
    git = prov.get("git") or {}
    return {"commit": git.get("commit"), "dirty": git.get("dirty"), "device": (prov.get("device") or {}).get("name"),
            "started": prov.get("started"), "finished": prov.get("finished")}


def provenance_summary(part: pd.DataFrame) -> str:
    """One line on where a table's runs come from: code commit(s) and dirty checkouts, device(s), date range, and
    the source model weights they start from."""
    weights = sorted({str(w)[:8] for w in part["source_weights"].dropna()}) if "source_weights" in part else []
    models = f"; source weights {', '.join(weights)}" if weights else ""
    if "commit" not in part or part["commit"].isna().all():
        return "provenance: not recorded in these runs' results.json" + models
    def recorded(name: str) -> list:  # row files keep the commit but not the rest of the provenance
        return list(part[name].dropna()) if name in part else []

    commits = sorted({str(c)[:10] for c in part["commit"].dropna()})
    devices = sorted({str(d) for d in recorded("device")})
    times = sorted(recorded("started") + recorded("finished"))
    span = f"{times[0][:16].replace('T', ' ')} to {times[-1][:16].replace('T', ' ')} UTC" if times else "unknown dates"
    code = f"commit{'s' if len(commits) > 1 else ''} {', '.join(commits)}"
    if "dirty" not in part:
        code += " (checkout state not recorded)"
    else:
        dirty = int(part["dirty"].fillna(False).astype(bool).sum())
        code += f" (dirty checkout in {dirty} of {len(part)} runs)" if dirty else " (clean)"
    missing = int(part["commit"].isna().sum())
    if missing:
        code += f", {missing} run(s) without a git revision"
    return f"provenance: {code}; device {', '.join(devices) or 'unknown'}; {span}{models}"


def _overrides(row: dict) -> dict[str, str]:
    """The Hydra overrides a row was run with (its "key" is [label, [override, ...]])."""
    try:
        _, overrides = json.loads(row.get("key") or "[null, []]")
    except (ValueError, TypeError):
        return {}
    return dict(o.split("=", 1) for o in overrides if "=" in o)


def _int_or_none(v):
    return None if v is None else int(v)


def cost_fields(cost: dict, time_s: dict | None = None) -> dict:
    """The cost columns (:data:`COST` after ms/query) of a results.json ``cost`` (with its ``time_s``) or a row's.

    ``time_s.adapt`` changed meaning when runs began to record ``time_s.stream``: before, it was the whole stream's
    time, so the ``adapt_share`` of those runs is the stream's share of the run (``stream_share``); since, it is the
    method's own adaptation and refinement (``method_share``, 0 for source), written as ``method_share`` by now. A
    row file's ``adapt_share`` is always the stream's share (every committed row was computed before the change;
    rows exported since carry ``method_share``). The two never share a column."""
    fields = {k: cost.get(k) for k in COST[1:]}
    if cost.get("adapt_share") is not None:
        new_meaning = time_s is not None and "stream" in time_s
        fields["method_share" if new_meaning else "stream_share"] = cost["adapt_share"]
    return fields


def load_rows(files, segments: bool = False) -> pd.DataFrame:
    """The rows of committed row files (JSON lines), in file order, as :func:`load_sweep`'s frame.

    A row holds "config" (its label: the adapter, or a variant such as "hatvtr lr 3e-5"), model, task, shift,
    severity, scenario, data, train_data, R@1, R@5, skewness, neg_share (share of negative scores), ms_per_query,
    counters and "key" (the label and the Hydra overrides it was run with; adapter, seed, shift_seed and posthoc are
    read from them: seed 42 when not overridden, the default). Rows exported by :func:`export_rows` also hold
    R@10, failed_rows, the ``cost`` fields and ``per_query`` (the compact per-query ranks, docs/outputs.md);
    older rows without them render as single runs without intervals. A stream row (scenario=continual) is named "stream"; with
    ``segments`` it is replaced by one row per shift of the stream (its "segments"). A later row of the same cell
    (configuration, model, task, scenario, data, seed, shift, severity) replaces an earlier one: a re-run row
    updates it.
    """
    out: dict[str, dict] = {}
    for file in files:
        for n, line in enumerate(Path(file).read_text().splitlines()):
            if not line.strip():
                continue
            r = json.loads(line)
            over = _overrides(r)
            base = {"data": r.get("data", "synth"), "task": r["task"], "scenario": r.get("scenario") or "qs",
                    "model": r["model"], "config": r["config"], "adapter": over.get("adapter", r["config"].split()[0]),
                    "posthoc": over.get("posthoc", "none"), "seed": int(r.get("seed", over.get("seed", 42))),
                    "shift_seed": _int_or_none(r.get("shift_seed", over.get("shift_seed"))),
                    "train_data": r.get("train_data"), "num_queries": r.get("num_queries"), "protocol": "one_to_one",
                    "ms_per_query": r.get("ms_per_query"), "neg_share": r.get("neg_share"),
                    "skipped": int(r.get("skipped") or 0), "collapsed": False, "dir": f"{file}:{n + 1}",
                    "failed_rows": int(r.get("failed_rows") or 0), "gallery_shift": r.get("gallery_shift", "none"),
                    "by_category": r.get("by_category"), "source_weights": r.get("source_weights"),
                    "comp": r.get("comp"),
                    "commit": r.get("commit"), "setup": json.dumps(run_setup(over, overrides=True), sort_keys=True),
                    **{f"{k} raw": (r.get("raw") or {}).get(k) for k in RAW},
                    **{k: (r.get("effect") or {}).get(k) for k in EFFECT},
                    **cost_fields(r.get("cost") or {})}
            if base["num_queries"] is None and (r.get("per_query") or {}).get("n"):  # older rows: from the ranks
                base["num_queries"] = int(r["per_query"]["n"])
            if r["config"].endswith(f" seed {base['seed']}"):  # a seed in the label: a repeat of the same cell
                base["config"] = r["config"][: -len(f" seed {base['seed']}")]
            parts = [(r["shift"], r["severity"], r)]
            if base["scenario"] == "continual":
                parts = [("stream", 0, r)]
                base["segments"] = _row_segments(r.get("segments"))
                if segments and r.get("segments"):
                    parts = [(g["shift"], g["severity"], g) for g in r["segments"]]
                    base["segments"] = None
                    base["ms_per_query"] = base["neg_share"] = None  # measured over the whole stream only
                    base.update({f"{k} raw": None for k in RAW})
            for shift, severity, metrics in parts:
                row = {**base, "shift": shift, "severity": 0 if shift == "clean" else int(severity),
                       "level": shift_level(shift), "R@1": metrics["R@1"], "R@5": metrics.get("R@5"),
                       "R@10": metrics.get("R@10"), "RSUM": rsum(metrics), "skewness": metrics.get("skewness"),
                       "queries": QueryRanks.decode(metrics["per_query"]) if metrics.get("per_query") else None}
                ident = [row[k] for k in ("config", "model", "task", "scenario", "data", "train_data", "seed", "shift",
                                          "severity", "gallery_shift")]
                out[json.dumps(ident)] = row  # a dict keeps the first position, with the later value
    if not out:
        raise ValueError(f"no rows in {', '.join(map(str, files))}")
    return _finish(pd.DataFrame(list(out.values())))


def _row_segments(segments: list[dict] | None) -> list[dict] | None:
    """A row file's stream "segments" in :func:`stream_segments`' form (ranks decoded), to be written out again."""
    if not segments:
        return None
    return [{"shift": g["shift"], "severity": g["severity"], "R@1": g["R@1"], "R@5": g.get("R@5"),
             "R@10": g.get("R@10"), "skewness": g.get("skewness"),
             "queries": QueryRanks.decode(g["per_query"]) if g.get("per_query") else None} for g in segments]


def export_rows(df: pd.DataFrame, path: str | Path, label: str | None = None) -> Path:
    """Write the runs of a sweep frame as a row file (one JSON object per line) that :func:`load_rows` reads back
    to the same tables, per-query ranks included (``per_query``, docs/outputs.md)."""
    lines = []
    for _, r in df.iterrows():
        over = [f"model={r['model']}", f"task={r['task']}", f"shift={r['shift']}", f"adapter={r['adapter']}",
                f"seed={int(r['seed'])}", f"shift.severity={int(r['severity'])}"]
        if r.get("posthoc") not in (None, "none"):
            over.append(f"posthoc={r['posthoc']}")
        if pd.notna(r.get("shift_seed")) and r["shift_seed"] != r["seed"]:
            over.append(f"shift_seed={int(r['shift_seed'])}")
        config = label or r["config"]
        row = {"key": json.dumps([config, over]), "config": config, "model": r["model"], "task": r["task"],
               "shift": r["shift"], "severity": int(r["severity"]), "scenario": r["scenario"], "data": r["data"],
               "train_data": r.get("train_data"), "seed": int(r["seed"]),
               "shift_seed": None if pd.isna(r.get("shift_seed")) else int(r["shift_seed"]),
               "num_queries": None if pd.isna(r.get("num_queries")) else int(r["num_queries"]),
               **{k: (None if pd.isna(r.get(k)) else float(r[k])) for k in ("R@1", "R@5", "R@10", "skewness")},
               "ms_per_query": None if pd.isna(r.get("ms_per_query")) else float(r["ms_per_query"]),
               "failed_rows": int(r.get("failed_rows") or 0),
               "cost": {k: (None if pd.isna(r.get(k)) else float(r[k])) for k in COST[1:]},
               "effect": {k: (None if pd.isna(r.get(k)) else float(r[k])) for k in EFFECT}}
        if r.get("gallery_shift") not in (None, "none"):
            row["gallery_shift"] = r["gallery_shift"]
        if isinstance(r.get("by_category"), dict):
            row["by_category"] = r["by_category"]
        if isinstance(r.get("source_weights"), str):
            row["source_weights"] = r["source_weights"]
        if isinstance(r.get("comp"), dict):  # the VideoComp probe (the comp layout)
            row["comp"] = r["comp"]
        if isinstance(r.get("commit"), str):  # the code the run was computed with (results.json provenance)
            row["commit"] = r["commit"]
        if pd.notna(r.get("R@1 raw")):  # a refining method: R@1 and skewness before its refinement
            row["raw"] = {k: (None if pd.isna(r.get(f"{k} raw")) else float(r[f"{k} raw"])) for k in RAW}
        if isinstance(r.get("queries"), QueryRanks):
            row["per_query"] = r["queries"].encode()
        if isinstance(r.get("segments"), list):  # a continual stream: its shifts, for --segments
            row["segments"] = [{**{k: v for k, v in g.items() if k != "queries"},
                                **({"per_query": g["queries"].encode()} if g.get("queries") is not None else {})}
                               for g in r["segments"]]
        lines.append(json.dumps(row))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def load_runs(sources, segments: bool = False) -> tuple[pd.DataFrame, list[dict]]:
    """Runs from any mix of sweep directories and row files (``*.jsonl``), in the given order, and the failed jobs
    of the sweeps."""
    frames, failures = [], []
    rows = [Path(s) for s in sources if str(s).endswith(".jsonl")]
    for s in sources:
        if not str(s).endswith(".jsonl"):
            df, fail = load_sweep(s, segments)
            frames.append(df)
            failures += fail
    if rows:
        frames.append(load_rows(rows, segments))
    df = pd.concat(frames, ignore_index=True)
    return (_ranks(separate_cells(df)) if len(frames) > 1 else df), failures


# ---- the VideoComp probe's records (the comp layout, tta/reporting/comp.py, renders them)
def comp_record(res: dict) -> dict | None:
    """The ``comp`` block of a results.json as a row carries it: without the per-triplet outcomes (the intervals
    and the paired difference are computed from them at the run), with ``source_model``: what the source model is (``source`` is its probe result)."""
    comp = res.get("comp")
    if not comp:
        return None
    out = {k: ({kk: vv for kk, vv in v.items() if kk != "outcomes"} if isinstance(v, dict) else v)
           for k, v in comp.items()}
    out["source_model"] = source_description(res.get("config") or {})
    return out


def source_description(config: dict) -> dict:
    """The settings that make a run's source model and probe what they are: its embedded recipe, the probe's data
    overrides and every model / data option that differs from the defaults of the run's model and data configs."""
    model = (config.get("model") or {}).get("name")
    data = (config.get("data") or {}).get("name")
    probe = config.get("comp_probe") or {}
    options = {}
    default = _defaults(model, data) if model and data else None
    for side in ("model", "data") if default else ():
        base, run = _flatten(default.get(side) or {}), _flatten(config.get(side) or {})
        options.update({f"{side}.{k}": _plain(v) for k, v in run.items()
                        if k in base and _plain(base[k]) != _plain(v) and "${" not in str(base[k])})
    return {"model": model, "recipe": list(config.get("embedded_recipe") or []), "options": options,
            "probe_overrides": list(probe.get("data_overrides") or [])}


@functools.cache
def _defaults(model: str, data: str) -> dict | None:
    """The unresolved default config of a model and a dataset (None when this checkout has no such config)."""
    from hydra.errors import HydraException
    from omegaconf import OmegaConf

    from tta.utils.config import compose

    try:
        return OmegaConf.to_container(compose("run", [f"model={model}", f"data={data}"]), resolve=False)
    except HydraException:  # a run of another checkout: its recipe alone names the source
        return None


def probe_only_row(res: dict, directory: str) -> dict:
    """The run-frame row of a ``task=comp`` results.json (the probe alone: no stream, no retrieval metrics)."""
    config = res.get("config") or {}
    name = lambda side: res.get(side) or (config.get(side) or {}).get("name")  # noqa: E731
    seed = int(config.get("seed", 42))
    return {"data": name("data"), "task": "comp", "scenario": "qs", "model": name("model"), "adapter": "source",
            "posthoc": "none", "config": "source", "shift": "clean", "severity": 0, "level": "clean",
            "seed": seed, "shift_seed": seed, "train_data": name("data"),
            "num_queries": None, "protocol": "one_to_one",
            "R@1": None, "skipped": 0, "collapsed": False, "dir": directory,
            "source_weights": res.get("source_weights"),
            "setup": json.dumps(run_setup(config), sort_keys=True), **effect_columns(res),
            **provenance_columns(res.get("provenance") or {}),
            "comp": comp_record(res)}
