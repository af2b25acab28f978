"""``python -m tta.report <sweep> --wandb``: a sweep's report as one W&B summary run.

The run (job type ``report``, group ``report``) holds every report table as a W&B Table (one row per table row,
the column headers flattened to "level/shift"), every plot as an image, the provenance line of each table, and the
report directory (tables.md/csv/tex, robustness, plots, index.html) as an artifact. Its id comes from the sweep's
path, so uploading the same sweep again updates the same summary run. Offline without credentials, like the runs'
logger (``wandb sync <out>/wandb/offline-run-*`` later).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from tta.utils.loggers import wandb_mode


def table_rows(table) -> tuple[list[str], list[list]]:
    """A report table as flat columns (index levels, then "group/label") and rows of plain values."""
    frame = table.frame.reset_index()
    columns = ["/".join(str(p) for p in c if str(p)) if isinstance(c, tuple) else str(c) for c in frame.columns]
    rows = [[v.item() if hasattr(v, "item") else v for v in row] for row in frame.itertuples(index=False)]
    return columns, rows


def upload_report(rep: dict, sweep: str | Path, out: str | Path, project: str = "tta", mode: str = "auto") -> str:
    """Log the report ``rep`` of :func:`tta.reporting.full_report.build_report` as one W&B run; returns the run's id."""
    import wandb

    name = Path(str(sweep)).resolve().name
    run_id = "report-" + hashlib.sha256(str(Path(str(sweep)).resolve()).encode()).hexdigest()[:12]
    settings = {"mode": m} if (m := wandb_mode(mode)) else {}
    run = wandb.init(project=project, id=run_id, resume="allow", name=f"report {name}", group="report",
                     job_type="report", dir=str(out), config={"sweep": str(sweep), "runs": int(len(rep["runs"]))},
                     reinit="create_new", **settings)
    try:
        media = {}
        for i, t in enumerate(rep["tables"]):
            columns, rows = table_rows(t)
            media[f"tables/{i:02d}"] = wandb.Table(columns=columns, data=rows)
            run.summary[f"tables/{i:02d}/title"] = t.title
            if getattr(t, "provenance", None):
                run.summary[f"tables/{i:02d}/provenance"] = t.provenance
        if not rep["robustness"].empty:
            media["robustness"] = wandb.Table(dataframe=rep["robustness"])
        for path in rep["figures"]:
            media[f"plots/{Path(path).stem}"] = wandb.Image(str(path), caption=Path(path).stem)
        run.log(media)
        art = wandb.Artifact(f"report-{run_id}", type="report", metadata={"sweep": str(sweep)})
        for f in sorted(Path(out).iterdir()):
            if f.is_file():
                art.add_file(str(f), name=f.name)
        run.log_artifact(art)
    except BaseException:
        run.finish(exit_code=1)
        raise
    run.finish()
    return run_id
