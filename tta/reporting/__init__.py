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

__all__ = ["load_sweep", "paper_tables", "robustness_table"]


def __getattr__(name: str):
    """The package's names load with their modules (pandas and scipy): a run that prints its title reads only
    :mod:`tta.reporting.labels`."""
    if name == "load_sweep":
        from tta.reporting.collect import load_sweep

        return load_sweep
    if name == "paper_tables":
        from tta.reporting.paper import paper_tables

        return paper_tables
    if name == "robustness_table":
        from tta.reporting.robustness import robustness_table

        return robustness_table
    raise AttributeError(f"module 'tta.reporting' has no attribute {name!r}")
