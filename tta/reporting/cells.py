"""What every table layout shares about the runs it shows: the cell key, the table's title, its seeds and the notes
on failed rows."""

from __future__ import annotations

import pandas as pd

from tta.reporting.collect import Cell, sides_label
from tta.reporting.labels import shift_label

#: the run-frame columns of one table of a sweep report: a table per (data, task, scenario)
KEYS = ("data", "task", "scenario")
#: under a table with a "stream %" column (runs recorded before time_s.adapt became the method's own work)
STREAM_SHARE_NOTE = ("stream %: the share of the run's wall time its query stream took, which runs recorded before "
                     "time_s.adapt became the method's own work give instead of adapt % (the share of the method's "
                     "own adaptation and refinement); the two are different quantities and are not compared")


def cell_key(row) -> Cell:
    """The :class:`~tta.reporting.collect.Cell` of one run (a row of the run frame), missing values as None."""
    return Cell(*(None if pd.isna(row[c]) else row[c] for c in Cell._fields))


def seeds_of(part: pd.DataFrame, by: list[str]) -> tuple[int, tuple]:
    """The most seeds any ``by`` group of ``part`` has, and every seed that occurs."""
    seeds = int(part.groupby(by)["seed"].nunique().max())
    return seeds, tuple(sorted(part["seed"].dropna().unique().tolist()))


def table_title(key: tuple, part: pd.DataFrame) -> str:
    """'<data> <task> (<scenario>[, trained on <train data>]) | <shifted sides>' of a (data, task, scenario)."""
    data, task, scenario = key
    train = part["train_data"].dropna().unique() if "train_data" in part else []
    # a cross-dataset table names the dataset the source model was fine-tuned on
    trained = f", trained on {train[0]}" if scenario == "cross" and len(train) == 1 and train[0] != data else ""
    sides = sides_label(part)
    return f"{data} {task} ({scenario}{trained})" + (f" | {sides}" if sides else "")


def run_shift_label(shift: str, severity, gallery_shift: str | None = "none") -> str:
    """A run's shift as tables name it, with its gallery shift when it has one ("ocr s7 + gallery gaussian s3")."""
    label = shift_label(shift, severity)
    return label if gallery_shift in (None, "none") or pd.isna(gallery_shift) else f"{label} + gallery {gallery_shift}"


def failed_notes(part: pd.DataFrame) -> list[str]:
    """One footnote per (model, configuration) with failed rows (the method diverged on them)."""
    notes = []
    for (model, config), g in part[part["failed_rows"] > 0].groupby(["model", "config"], sort=False):
        cells = ", ".join(dict.fromkeys(shift_label(s, v) for s, v in zip(g["shift"], g["severity"], strict=True)))
        notes.append(f"{model} {config}: {int(g['failed_rows'].sum())} failed row(s) in {len(g)} run(s) ({cells}): "
                     f"non-finite scores, scored as misses")
    return notes
