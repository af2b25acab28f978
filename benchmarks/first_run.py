"""The first run on an empty cache, stage by stage: wall time and how many cores each stage keeps busy.

    python benchmarks/first_run.py                       # `python -m tta.run` (what `make run` runs) on a fresh cache
    python benchmarks/first_run.py --cache /tmp/c model=xpool   # any tta.run override after the options

The run is started as a subprocess with ``TTA_CACHE`` pointing to an empty directory, so every embedded asset is
built that does not ship with the repository: the rendered dataset, and the checkpoint rebuilt from its shipped
weights. With ``TTA_TRAIN_EMBEDDED=1`` in the environment every model is trained as well (pretraining corpus,
pretrained model, decoded frames, caption features, fine-tuned model).
Meanwhile the machine's CPU use is sampled from ``/proc/stat`` every ``--every`` seconds. The stages are cut at the
set-up display's log lines (one when each stage starts, one when the set-up is done); the table gives, per stage,
its wall time, the mean number of busy cores and the idle core-seconds: the most that running stages side by side
could win. The sampling is machine-wide, so anything else running shows up as "busy": run it on a quiet machine.
The environment (``make``'s venv) is not included: time it with ``time make .venv/.installed`` on a fresh clone.
This is a measurement script, not a test.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tta, for the row file, from a checkout

_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")
_STAGE = re.compile(r"set-up \d+ % · stage (\d+)/\d+: (.+?) · ")


def cpu_counters() -> tuple[int, int] | None:
    """(total, idle) jiffies of all cores since boot, or None where /proc/stat does not exist."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except OSError:
        return None
    return sum(fields), fields[3] + fields[4]


def log_events(lines: list[str]) -> list[tuple[float, str]]:
    """(epoch seconds, event) of the set-up's boundaries: "first use", each stage's first line, "set-up done"."""
    events: list[tuple[float, str]] = []
    seen: set[str] = set()
    for line in lines:
        m = _STAMP.match(line)
        if not m:
            continue
        t = dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        stage = _STAGE.search(line)
        if "first use:" in line and "set-up stages" in line:
            events.append((t, "start-up (imports, config, planning)"))
        elif stage and stage.group(1) not in seen:
            seen.add(stage.group(1))
            events.append((t, stage.group(2)))
        elif "set-up done" in line:
            events.append((t, "the run (test data, stream, scores)"))
    return events


def stage_table(events: list[tuple[float, str]], samples: list[tuple[float, float]], t_start: float,
                t_end: float, cores: int) -> list[dict]:
    """Per stage: wall seconds, mean busy cores over the samples inside it, idle core-seconds.

    ``events`` mark where each stage starts (the first begins at ``t_start``: the log's first event names what
    came before it); ``samples`` are (epoch seconds, busy cores over the interval ending there).
    """
    names = [name for _, name in events] or ["run"]
    starts = [t_start] + [t for t, _ in events[1:]]
    rows = []
    for i, name in enumerate(names):
        a, b = starts[i], starts[i + 1] if i + 1 < len(starts) else t_end
        inside = [busy for t, busy in samples if a < t <= b]
        mean = sum(inside) / len(inside) if inside else None
        rows.append({"stage": name, "wall_s": b - a, "busy_cores": mean,
                     "idle_core_s": None if mean is None else (b - a) * max(cores - mean, 0.0)})
    return rows


def run_sampled(cmd: list[str], env: dict, log_path: Path, every: float) -> tuple[int, float, float, list]:
    """Run ``cmd`` with its output in ``log_path``; (exit code, start, end, [(time, busy cores)])."""
    samples: list[tuple[float, float]] = []
    cores = os.cpu_count() or 1
    with open(log_path, "w") as log:
        start = time.time()
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        prev = cpu_counters()
        while proc.poll() is None:
            time.sleep(every)
            cur = cpu_counters()
            if prev and cur and cur[0] > prev[0]:
                total, idle = cur[0] - prev[0], cur[1] - prev[1]
                samples.append((time.time(), cores * (total - idle) / total))
            prev = cur
    return proc.returncode, start, time.time(), samples


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", help="an empty directory for TTA_CACHE (default: a new temporary one)")
    parser.add_argument("--every", type=float, default=0.5, help="seconds between CPU samples")
    parser.add_argument("--out", help="directory of the run's log and results (default: a new temporary one)")
    parser.add_argument("--json", help="also write the table here")
    parser.add_argument("--rows", help="also write the table as a row file for docs/results/rows/ "
                                       "(python -m tta.report FILE --layout measurements)")
    args, overrides = parser.parse_known_args(argv)
    cache = Path(args.cache or tempfile.mkdtemp(prefix="tta-first-run-"))
    if cache.exists() and any(cache.iterdir()):
        sys.exit(f"error: --cache {cache} is not empty; give an empty or new directory so that every stage runs")
    out = Path(args.out or tempfile.mkdtemp(prefix="tta-first-run-out-"))
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, TTA_CACHE=str(cache))
    cmd = [sys.executable, "-m", "tta.run", f"hydra.run.dir={out}", *overrides]
    code, start, end, samples = run_sampled(cmd, env, out / "run.log", args.every)
    if code != 0:
        sys.exit(f"error: the run failed (exit {code}); its log: {out / 'run.log'}")
    events = log_events((out / "run.log").read_text().splitlines())
    rows = stage_table(events, samples, start, end, os.cpu_count() or 1)
    print(f"{' '.join(cmd[1:])}\ncache {cache}; {os.cpu_count()} cores; machine-wide CPU use (keep it quiet)\n")
    print("| stage | wall s | busy cores | idle core-s |\n|---|---:|---:|---:|")
    for r in rows:
        busy = "—" if r["busy_cores"] is None else f"{r['busy_cores']:.2f}"
        idle = "—" if r["idle_core_s"] is None else f"{r['idle_core_s']:.1f}"
        print(f"| {r['stage']} | {r['wall_s']:.1f} | {busy} | {idle} |")
    idle_total = sum(r["idle_core_s"] or 0.0 for r in rows)
    print(f"| **total** | **{end - start:.1f}** | | {idle_total:.1f} |")
    results = json.loads((out / "results.json").read_text())
    print(f"\nR@1 {results.get('retrieval', {}).get('R@1')}; log and results in {out}")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "wall_s": end - start, "cmd": cmd}, indent=1))
    if args.rows:
        write_rows(args.rows, rows, end - start, " ".join(["python benchmarks/first_run.py", *(argv or sys.argv[1:])]))
    return rows


#: the printed table's columns, as a row file names them (tta/reporting/measurements.py)
COLUMNS = [{"name": "stage"}, {"name": "wall s", "format": "{:.1f}", "align": "right"},
           {"name": "busy cores", "format": "{:.2f}", "align": "right"},
           {"name": "idle core-s", "format": "{:.1f}", "align": "right"}]


def write_rows(path, rows: list[dict], wall_s: float, command: str) -> Path:
    """The stage table as a row file: a row per stage, then the total (bold, as printed)."""
    from tta.reporting.measurements import write_measurements

    cells = [{"cells": {"stage": r["stage"], "wall s": r["wall_s"], "busy cores": r["busy_cores"],
                        "idle core-s": r["idle_core_s"]}} for r in rows]
    total = {"stage": "**total**", "wall s": f"**{wall_s:.1f}**", "busy cores": "",
             "idle core-s": sum(r["idle_core_s"] or 0.0 for r in rows)}
    return write_measurements(path, COLUMNS, [*cells, {"cells": total}], title="The first run, stage by stage",
                              command=command)


if __name__ == "__main__":
    main()
