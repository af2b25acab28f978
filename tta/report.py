"""``python -m tta.report <sweep dir | rows.jsonl ...>``: the one results pipeline (tables, robustness, plots, HTML).

Sources are sweep directories (every results.json under them: a Hydra multirun tree such as
``outputs/experiments/<name>``, or outputs/runs) and committed row files (``docs/results/rows/*.jsonl``, one run per
line), in any mix; all go through the same tables (:mod:`tta.reporting`; this module is its command line).

    python -m tta.run -m experiment=v2t-gaussian-severity5        # run a table's configurations
    python -m tta.report outputs/experiments/v2t-gaussian-severity5   # full report of the sweep (below)
    python -m tta.report docs/results/rows/t2v-text-shifts.jsonl --model xpool --bold --mean   # one pivot table
    python -m tta.report docs/results/rows/v2t-gaussian5-all-methods.jsonl --layout list --sort
    python -m tta.report --pages docs/results/pages.yaml             # re-render every docs/results/<name>.md

Layouts: ``paper`` (the default for sweep directories) writes the full report below; ``pivot`` (the default for row
files) prints shifts x (model, configuration) with "R@1 / skewness" cells (``--second R@5|none``), ``--model``
filters backbones, ``--bold`` marks the best R@1 of each row per backbone, ``--mean`` adds the mean over the shifted
rows, ``--per-model`` makes one table per backbone, ``--segments`` splits continual streams into their shifts;
``list`` prints one line per run (``--sort``: by model, task and adapter order).

The ``paper`` layout writes to ``--out`` (default ``<sweep dir>/report``):

* ``tables.md``, ``tables.csv``, ``tables.tex``: the paper's layout (HAT-VTR Tables 1-5): per (data, task,
  scenario), rows = adapters per backbone, columns = shifts grouped by shift level, plus Avg and the cost
  (ms/query, adaptation share, peak memory, failed rows); cells are mean ± sd (n seeds), ▲/▼ where the paired
  95 % interval against source excludes zero;
* ``comparisons.md`` / ``.csv`` / ``.tex``: every configuration against source (and ``--baseline``): the paired
  difference, its seed-and-query interval and p, and win/tie/loss counts with the number of comparisons
  (:mod:`tta.reporting.paired`); ``gain_cost_*.png``: gain against ms/query ratio, one point per adapter;
* ``robustness.md`` / ``.csv``: relative and absolute robustness and MMI against the clean reference: a type
  averages its severities, a level (or Schiappa category) and the overall average types, MMI is flat
  (docs/methods/metrics.md, "Robustness scores");
* ``hubness.md`` / ``.csv`` / ``.tex``: the hubness statistics of every cell (skewness, truncated-normal skewness,
  Atkinson, Robin Hood, antihub rate, hub occurrence);
* ``categories.md`` / ``.csv`` / ``.tex``: the metric of every run per video category (results.json
  ``by_category``), when the runs have categories;
* ``kocc_*.png`` (k-occurrence histograms per adapter, Fig. 2), ``sims_*.png`` (score heatmaps of the first 250
  queries, Fig. 9), ``severity_*.png`` (R@1 against severity per shift, Fig. 13);
* ``index.html``: all of it on one self-contained page (images inlined).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from tta.reporting.collect import export_rows, load_runs
from tta.reporting.full_report import build_report, with_provenance
from tta.reporting.pages import LAYOUTS, OWN_ROW_LAYOUTS, render_pages, render_tables
from tta.reporting.robustness import ROBUST_METRICS


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m tta.report", description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.split("\n")[5:12]))
    ap.add_argument("sources", nargs="*", help="sweep directories (outputs/experiments/<name>, outputs/sweeps/<time>, "
                                               "any tree of run directories) and/or row files (*.jsonl)")
    ap.add_argument("--layout", choices=["paper", *LAYOUTS, *OWN_ROW_LAYOUTS], default=None,
                    help="paper: full report (default for directories); pivot (default for row files); list; "
                         "compare: paired differences to source with intervals and win/tie/loss counts; "
                         "comp: the VideoComp probe (results.json 'comp') of the source models and after adaptation; "
                         "runtime: timings beside the paper's (rows of tta/reporting/runtime.py); "
                         "measurements: a benchmark's own table (rows of tta/reporting/measurements.py)")
    ap.add_argument("--out", default=None, help="paper layout: output directory (default: <sweep>/report)")
    ap.add_argument("--metric", default="R@1", choices=["R@1", "R@5", "R@10", "R@50", "RSUM", "MdR", "MnR", "skewness"])
    ap.add_argument("--baseline", default=None, help="paper and compare layouts: compare every configuration with "
                                                     "this one (paired intervals, win/tie/loss), besides source")
    ap.add_argument("--robustness", default=None, help=f"paper: metric of the robustness scores (default --metric; "
                                                       f"one of {', '.join(ROBUST_METRICS)})")
    ap.add_argument("--reference", default="source", choices=["source", "own"],
                    help="robustness against the clean source run or the method's own clean run")
    ap.add_argument("--groups", default="level", choices=["level", "schiappa"],
                    help="robustness groups: HAT-VTR shift levels or the categories of Schiappa et al.")
    ap.add_argument("--rows", default=None, help="also write the runs as a row file (JSONL, per-query ranks "
                                                 "included) for docs/results/rows/")
    ap.add_argument("--cost", default=None, help="ms/query from these rows of benchmarks/method_overhead.py "
                                                 "(cost columns and the gain-against-cost plot)")
    ap.add_argument("--second", default="skewness", choices=["skewness", "R@5", "none"],
                    help="pivot: the second value of each cell")
    ap.add_argument("--model", action="append", help="only these backbones (repeatable)")
    ap.add_argument("--bold", action="store_true", help="pivot: bold the best value of each row, per backbone")
    ap.add_argument("--mean", action="store_true", help="pivot: a row with the mean over the shifted rows")
    ap.add_argument("--per-model", action="store_true", help="pivot: one table per backbone")
    ap.add_argument("--segments", action="store_true", help="split continual streams into their shifts")
    ap.add_argument("--sort", action="store_true", help="list: by model, task, then the adapter order")
    ap.add_argument("--wandb", action="store_true", help="paper layout: also log the report as one W&B summary run "
                                                         "(offline without an API key; docs/dashboards.md)")
    ap.add_argument("--wandb-project", default="tta", help="with --wandb: the W&B project")
    ap.add_argument("--pages", default=None, help="render the docs pages of this spec (docs/results/pages.yaml)")
    ap.add_argument("--page", action="append", help="with --pages: only these pages (repeatable)")
    ap.add_argument("--date", default=None, help="with --pages: the rendering date to print (default: today)")
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = _parser()
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        if args.pages:
            for path in render_pages(args.pages, args.page, args.date):
                print(f"wrote {path}")
            return 0
        if not args.sources:
            ap.error("give a sweep directory or row files (or --pages)")
        missing = [s for s in args.sources if not Path(s).exists()]
        if missing:
            raise FileNotFoundError(f"{', '.join(missing)}: no such sweep directory or row file; give the "
                                    f"hydra.sweep.dir of a sweep, a run directory or a .jsonl row file")
        layout = args.layout or ("pivot" if any(s.endswith(".jsonl") for s in args.sources) else "paper")
        if layout == "paper":
            rep = build_report(args.sources, args.out, args.metric, args.baseline,
                               args.robustness, args.reference, args.groups, args.rows, args.cost)
            print("\n\n".join(with_provenance(t) for t in rep["tables"] + rep["comparisons"]))
            print(f"\n{rep['summary']}; report: {rep['html']}")
            if args.wandb:
                from tta.reporting.wandb_summary import upload_report

                run_id = upload_report(rep, args.sources[0], rep["html"].parent, project=args.wandb_project)
                print(f"W&B summary run: {args.wandb_project}/{run_id}")
            return 0
        if args.rows:  # the runs as a row file, whatever the layout prints (the comp probe's runs have no paper tables)
            export_rows(load_runs(args.sources)[0], args.rows)
            print(f"rows written to {args.rows}")
        tables = render_tables(args.sources, layout, args.metric, args.second, args.model, args.bold, args.mean,
                               args.per_model, args.segments, args.sort, baseline=args.baseline, cost=args.cost)
    except (FileNotFoundError, ValueError) as e:
        print(f"tta.report: {e}", file=sys.stderr)
        return 2
    print("\n\n".join(t.to_markdown() for t in tables))
    return 0


if __name__ == "__main__":
    sys.exit(main())
