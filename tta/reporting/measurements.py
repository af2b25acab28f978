"""Benchmark tables (``--layout measurements``): the rows a benchmark measured, in its own columns, rendered under
the command, commit, date and machine that measured them.

A row file is JSON lines: first a header record, then one record per table row::

    {"header": "measurements", "command": "python benchmarks/x.py ...", "commit": "cc2815c",
     "date": "2026-11-25 20:39 UTC", "machine": "2-core AMD EPYC, load average 2.75",
     "columns": [{"name": "shift"}, {"name": "clips/s", "format": "{:.2f}", "align": "right"}],
     "missing": "—", "before": ["a line the benchmark printed above its table"], "after": [...]}
    {"cells": {"shift": "gaussian", "clips/s": 12.92}, "severity": 3}

``commit`` may be a list (a table assembled from runs of several commits). ``columns`` orders the table; a number
is printed with its column's ``format`` (a ``str.format`` pattern), a missing or null cell as ``missing``, a string
as it is. Fields of a row besides ``cells`` record what it was measured with and are not printed. The benchmark owns
its columns; :func:`write_measurements` writes the file.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys
from dataclasses import dataclass, field
from pathlib import Path

PROVENANCE = ("command", "commit", "date", "machine")


@dataclass
class MeasurementTable:
    """One benchmark table, read from a row file (the attributes the result pages read of any table included)."""

    title: str
    header: dict
    rows: list[dict]
    seed_values: tuple = ()
    marks: None = None
    notes: list = field(default_factory=list)

    def columns(self) -> list[dict]:
        return [c if isinstance(c, dict) else {"name": c} for c in self.header["columns"]]

    def caption(self) -> str:
        h = self.header
        commit = ", ".join(h["commit"]) if isinstance(h["commit"], list) else h["commit"]
        text = f"**{self.title}** (measured by `{h['command']}`, commit {commit}, {h['date']}; {h['machine']}"
        return text + (f"; {h['taken_from']})" if h.get("taken_from") else ")")

    def cells(self) -> list[list[str]]:
        missing = self.header.get("missing", "")
        out = []
        for row in self.rows:
            line = []
            for col in self.columns():
                value = row["cells"].get(col["name"])
                if value is None:
                    line.append(missing)
                elif isinstance(value, (int, float)) and not isinstance(value, bool) and col.get("format"):
                    line.append(col["format"].format(value))
                else:
                    line.append(str(value))
            out.append(line)
        return out

    def to_markdown(self) -> str:
        cols = self.columns()
        lines = [self.caption(), "", *self.header.get("before", [])]
        if self.header.get("before"):
            lines.append("")
        lines += ["| " + " | ".join(c["name"] for c in cols) + " |",
                  "|" + "".join("---:|" if c.get("align") == "right" else "---|" for c in cols)]
        lines += ["|" + "".join(f" {c} |" if c else " |" for c in cells) for cells in self.cells()]
        after = self.header.get("after", [])
        return "\n".join(lines + ([""] + after if after else []))  # a line right under a table would join it


def load_measurements(path) -> tuple[dict, list[dict]]:
    """The header and the rows of one row file; a file without its provenance or columns is refused."""
    records = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    if not records or records[0].get("header") != "measurements":
        raise ValueError(f"{path}: not a measurement row file: its first line should be the header record "
                         f'{{"header": "measurements", "command", "commit", "date", "machine", "columns"}}')
    header, rows = records[0], records[1:]
    lacking = [k for k in (*PROVENANCE, "columns") if not header.get(k)]
    if lacking:
        raise ValueError(f"{path}: the header record lacks {', '.join(lacking)}: a benchmark's rows say which "
                         f"command, commit, date and machine measured them (write them with write_measurements)")
    names = {c["name"] if isinstance(c, dict) else c for c in header["columns"]}
    for n, row in enumerate(rows, 2):
        unknown = set(row.get("cells", {})) - names
        if "cells" not in row or unknown:
            raise ValueError(f"{path}:{n}: a row holds 'cells' of the header's columns"
                             + (f" (unknown: {', '.join(sorted(unknown))})" if unknown else ""))
    return header, rows


def measurement_tables(sources, title: str | None = None) -> list[MeasurementTable]:
    """One table per row file, in file order."""
    tables = []
    for src in sources:
        header, rows = load_measurements(src)
        tables.append(MeasurementTable(title or header.get("title") or Path(src).stem, header, rows))
    return tables


def commit_label() -> str:
    """HEAD, marked ``+uncommitted`` where tracked files differ from it (the rows' code is then not that commit);
    docs/results/ is output, not code: a tool that rewrites several committed row files records HEAD in each."""
    from tta.results.environment import git_revision

    rev = git_revision(exclude=("docs/results",))
    return "unknown" if rev is None else rev["commit"][:7] + ("+uncommitted" if rev["dirty"] else "")


def machine_line() -> str:
    """The machine a benchmark ran on, as the rows record it: CPU, core count, load, torch, accelerator."""
    try:
        import torch

        from tta.results.environment import device_name

        accel = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA device"
        versions, cpu = f"torch {torch.__version__}", device_name("cpu")["name"]
    except ImportError:
        accel, versions, cpu = "torch not installed", "", platform.processor() or platform.machine()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{cpu} ({platform.machine()}), {os.cpu_count()} CPUs, load average {load:.2f} as the rows were "
            f"written; {versions}, Python {platform.python_version()}; {accel}")


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def write_measurements(path, columns: list, rows: list[dict], *, title: str | None = None, machine: str | None = None,
                       command: str | None = None, date: str | None = None, before=(), after=(), missing: str = "—",
                       **extra) -> Path:
    """Write a benchmark's rows (``{"cells": {...}, ...what they were measured with}``) under a header naming the
    command (default: this process's), commit, date (default: now, UTC) and machine (default :func:`machine_line`)."""
    header = {"header": "measurements", "title": title,
              "command": command or "python " + " ".join([os.path.relpath(sys.argv[0]), *sys.argv[1:]]),
              "commit": commit_label(), "date": date or utc_now(),
              "machine": machine or machine_line(), "columns": columns, "missing": missing,
              "before": list(before), "after": list(after), **extra}
    header = {k: v for k, v in header.items() if v not in (None, [])}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in [header, *rows]))
    load_measurements(path)  # what it wrote renders
    return path
