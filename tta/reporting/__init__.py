"""Reports of runs (``python -m tta.report``, :mod:`tta.report`), one module per concern:

* :mod:`~tta.reporting.collect`: runs (sweep results.json files or committed row files) as one frame;
* :mod:`~tta.reporting.table`: the one :class:`~tta.reporting.table.Table` and its renderers;
  :mod:`~tta.reporting.cells`: what every layout shares (cell key, titles, seeds, notes);
* layouts: :mod:`~tta.reporting.paper` (the paper's tables, by severity), :mod:`~tta.reporting.pivot`,
  :mod:`~tta.reporting.run_list`, :mod:`~tta.reporting.paired` (paired comparisons, win/tie/loss),
  :mod:`~tta.reporting.robustness`, :mod:`~tta.reporting.hubness`, :mod:`~tta.reporting.categories`; the
  ``--layout`` names are :data:`tta.reporting.pages.LAYOUTS`;
* :mod:`~tta.reporting.full_report` (the ``paper`` layout's report directory), :mod:`~tta.reporting.html_page`,
  :mod:`~tta.reporting.plots`; :mod:`~tta.reporting.pages` (docs/results pages); :mod:`~tta.reporting.compare`
  (the statistics of one paired comparison); :mod:`~tta.reporting.overhead`; :mod:`~tta.reporting.wandb_summary`.
"""

from tta.reporting.collect import load_sweep
from tta.reporting.paper import paper_tables
from tta.reporting.robustness import robustness_table

__all__ = ["load_sweep", "paper_tables", "robustness_table"]
