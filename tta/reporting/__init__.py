"""Sweep reports (``python -m tta.report <sweep dir>``): collect results.json files, paper-style tables, robustness
scores, plots and one self-contained HTML page. See :mod:`tta.report`."""

from tta.reporting.collect import load_sweep
from tta.reporting.tables import paper_tables, robustness_table

__all__ = ["load_sweep", "paper_tables", "robustness_table"]
