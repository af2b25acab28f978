"""Start-up: the seconds a warm run spends outside its query stream, as a single run and as a job after the first
of an in-process sweep, each against its "before" (ordinary imports; no reuse across jobs).

    python benchmarks/startup.py                   # about 2 minutes on a quiet machine (9 default runs)
    python benchmarks/startup.py --rounds 3 adapter=tent     # any tta.run override after the options
    python benchmarks/startup.py --rows rows.jsonl           # also the summary as a row file (--layout measurements)
    python benchmarks/startup.py --recompute model=xpool task=t2v shift=char_swap   # a third arm, below

Single runs (``python -m tta.run`` subprocesses on a warm cache, interleaved per round so that the machine's drift
reaches both arms alike): ``deferred`` as shipped, ``eager`` with ``TTA_EAGER_IMPORTS=1`` (tta/utils/lazy_imports.py
off), and with ``--recompute`` ``recomputed``: as shipped, with the run cache's stored shift effects (the caption
distances and the clean reference, tta/data/shift_effect.py) removed before each run, so that it computes them as a
run did before they were stored. Each reports the run's own recorded ``time_s.total - time_s.stream`` (from the run's start, imports
included), the process's wall time minus the stream (interpreter and Hydra start included: what a user waits),
and the CPU seconds of the process outside the stream (``cpu_total - cpu_stream`` of the run, and
``cpu_process - cpu_stream``: from the interpreter's start; loader workers, which serve the stream, not counted).

In-process sweeps (one process runs ``--jobs`` runs one after another, as Hydra's basic launcher does): ``reuse``
as shipped (tta/utils/reuse.py: model and gallery kept across jobs), ``rebuild`` with ``TTA_REUSE=0``; each job's
``time_s.total - time_s.stream`` and its CPU counterpart.

Goals (issue "Speed where users run it"): a warm single run at most 6 s outside the stream (the process's wall
time minus the stream), a job after the first at most 2 s (its own total minus stream). The load average is printed
next to every figure: the goals are for a quiet machine, and on a shared one the CPU seconds are the steadier
figure. A measurement script, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_SINGLE_S, GOAL_NEXT_JOB_S = 6.0, 2.0


def load() -> str:
    return "load " + "/".join(f"{x:.1f}" for x in os.getloadavg())


def _env(**flags: bool) -> dict:
    env = dict(os.environ)
    for name, on in flags.items():
        env.pop(name, None)
        if on:
            env[name] = "1" if name == "TTA_EAGER_IMPORTS" else "0"
    return env


def single_run(overrides: list[str], eager: bool, out: Path, forget: Path | None = None) -> dict:
    """One ``python -m tta.run`` process on a warm cache (without ``forget``, removed first)."""
    if forget is not None:
        shutil.rmtree(forget, ignore_errors=True)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "tta.run", f"hydra.run.dir={out}", "print_config=false",
                           "skip_complete=false", *overrides], env=_env(TTA_EAGER_IMPORTS=eager),
                          capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"error: the run failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    t = json.loads((out / "results.json").read_text())["time_s"]
    return {"own_s": t["total"] - t["stream"], "wall_s": wall - t["stream"], "stream_s": t["stream"],
            "own_cpu_s": t["cpu_total"] - t["cpu_stream"], "process_cpu_s": t["cpu_process"] - t["cpu_stream"],
            "load": load()}


SWEEP = """
import json, sys, time
t0 = time.perf_counter()
from tta.run import run
from tta.stages import register_resolvers
from tta.utils.config import compose
register_resolvers()
imported = time.perf_counter() - t0
jobs = []
for i in range(int(sys.argv[1])):
    res = run(compose("run", ["print_config=false", "skip_complete=false", *sys.argv[3:]]), f"{sys.argv[2]}/job{i}")
    t = res["time_s"]
    jobs.append({"own_s": t["total"] - t["stream"], "own_cpu_s": t["cpu_total"] - t["cpu_stream"],
                 "stream_s": t["stream"], "R@1": res["retrieval"]["R@1"]})
print(json.dumps({"import_s": imported, "jobs": jobs}))
"""


def sweep(overrides: list[str], jobs: int, rebuild: bool, out: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", SWEEP, str(jobs), str(out), *overrides],
                          env=_env(TTA_REUSE=rebuild), capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"error: the in-process sweep failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return {**result, "load": load()}


def memo_folder(overrides: list[str]) -> Path:
    """Where the runs of ``overrides`` store their shift effects (tta/data/shift_effect.py)."""
    from tta.data.shift_effect import MEMO_FOLDER
    from tta.utils.config import compose
    from tta.utils.paths import cache_root

    return cache_root(compose("run", overrides).paths.cache_dir) / MEMO_FOLDER


def _median(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def parse(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    """The options, and the tta.run overrides after them."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2, help="single runs per arm")
    parser.add_argument("--jobs", type=int, default=2, help="runs of each in-process sweep")
    parser.add_argument("--json", help="also write the measurements here")
    parser.add_argument("--rows", help="also write the summary as a row file for docs/results/rows/ "
                                       "(python -m tta.report FILE --layout measurements)")
    parser.add_argument("--goal", type=float, default=GOAL_SINGLE_S,
                        help="seconds a warm single run may spend outside its stream (on a GPU: 10, "
                             "docs/results/hatvtr-runtime.md)")
    parser.add_argument("--recompute", action="store_true",
                        help="a third arm of single runs that compute their shift effects again (module docstring)")
    return parser.parse_known_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args, overrides = parse(argv)
    if args.rounds < 1 or args.jobs < 2:
        sys.exit("error: --rounds must be at least 1 and --jobs at least 2")
    work = Path(tempfile.mkdtemp(prefix="tta-startup-"))
    print(f"{os.cpu_count()} cores; overrides: {' '.join(overrides) or 'defaults'}; {load()}", flush=True)
    single_run(overrides, False, work / "warm")  # fills the cache and the page cache: not reported
    arms: dict[str, list[dict]] = {"deferred": [], "eager": [], **({"recomputed": []} if args.recompute else {})}
    forget = memo_folder(overrides) if args.recompute else None
    printed: list[str] = []
    for r in range(args.rounds):
        for arm in arms:
            m = single_run(overrides, arm == "eager", work / f"{arm}{r}", forget if arm == "recomputed" else None)
            arms[arm].append(m)
            printed.append(f"single run {r + 1} {arm:8s}: outside the stream: process wall {m['wall_s']:5.2f} s (cpu "
                           f"{m['process_cpu_s']:5.2f}), run's own {m['own_s']:5.2f} s (cpu {m['own_cpu_s']:5.2f}); "
                           f"stream {m['stream_s']:5.1f} s; {m['load']}")
            print(printed[-1], flush=True)
    sweeps = {}
    for arm in ("reuse", "rebuild"):
        sw = sweeps[arm] = sweep(overrides, args.jobs, arm == "rebuild", work / f"sweep-{arm}")
        printed.append(f"in-process sweep {arm:7s}: imports {sw['import_s']:.2f} s; outside the stream per job "
                       + ", ".join(f"{j['own_s']:.2f} s (cpu {j['own_cpu_s']:.2f})" for j in sw["jobs"])
                       + f"; R@1 {', '.join(str(j['R@1']) for j in sw['jobs'])}; {sw['load']}")
        print(printed[-1], flush=True)
    d, e = arms["deferred"], arms["eager"]
    single = _median(d, "wall_s")
    print(f"\nwarm single run, outside the stream (median of {args.rounds}; {load()}):\n"
          f"  process wall {single:.2f} s (eager imports {_median(e, 'wall_s'):.2f} s, ratio "
          f"{single / _median(e, 'wall_s'):.2f}); cpu {_median(d, 'process_cpu_s'):.2f} s (eager "
          f"{_median(e, 'process_cpu_s'):.2f}, ratio {_median(d, 'process_cpu_s') / _median(e, 'process_cpu_s'):.2f})\n"
          f"  run's own record {_median(d, 'own_s'):.2f} s (eager {_median(e, 'own_s'):.2f}); cpu "
          f"{_median(d, 'own_cpu_s'):.2f} s (eager {_median(e, 'own_cpu_s'):.2f})\n"
          f"  goal <= {args.goal:g} s: {'met' if single <= args.goal else 'not met'}")
    if args.recompute:
        rc = _median(arms["recomputed"], "wall_s")
        print(f"  shift effects computed again: process wall {rc:.2f} s, ratio {single / rc:.2f}")
    later = {arm: statistics.median(j["own_s"] for j in sw["jobs"][1:]) for arm, sw in sweeps.items()}
    later_cpu = {arm: statistics.median(j["own_cpu_s"] for j in sw["jobs"][1:]) for arm, sw in sweeps.items()}
    first = sweeps["reuse"]["jobs"][0]["own_s"]
    print(f"a job after the first, outside the stream (run's own record; {load()}):\n"
          f"  {later['reuse']:.2f} s (cpu {later_cpu['reuse']:.2f}); without reuse {later['rebuild']:.2f} s (cpu "
          f"{later_cpu['rebuild']:.2f}), ratio {later['reuse'] / later['rebuild']:.2f}; to the sweep's first job "
          f"{later['reuse'] / max(first, 1e-9):.2f}\n"
          f"  goal <= {GOAL_NEXT_JOB_S:.0f} s: {'met' if later['reuse'] <= GOAL_NEXT_JOB_S else 'not met'}")
    recalls = {j["R@1"] for sw in sweeps.values() for j in sw["jobs"]}
    print(f"R@1 of every sweep job: {sorted(recalls)} ({'identical' if len(recalls) == 1 else 'DIFFERENT'})")
    result = {"single": arms, "sweeps": sweeps, "overrides": overrides, "cores": os.cpu_count()}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    if args.rows:
        write_rows(args.rows, arms, sweeps, args.rounds, printed, sorted(recalls), args.goal, overrides)
    return result


#: the summary table: each measure as shipped, without the change (ordinary imports, or no reuse), their ratio, goal
COLUMNS = [{"name": "outside the stream"}, {"name": "as shipped s", "format": "{:.2f}", "align": "right"},
           {"name": "without s", "format": "{:.2f}", "align": "right"}, {"name": "without is"},
           {"name": "ratio", "format": "{:.2f}", "align": "right"}, {"name": "goal"}, {"name": "met"}]


def write_rows(path: str, arms: dict, sweeps: dict, rounds: int, printed: list[str], recalls: list,
               goal: float = GOAL_SINGLE_S, overrides: list[str] = ()) -> None:
    from tta.reporting.measurements import write_measurements

    d, e = arms["deferred"], arms["eager"]
    later = {arm: sw["jobs"][1:] for arm, sw in sweeps.items()}

    def row(label, shipped, without, what, goal=None):
        met = None if goal is None else ("yes" if shipped <= goal else "no")
        return {"cells": {"outside the stream": label, "as shipped s": shipped, "without s": without,
                          "without is": what, "ratio": shipped / without, "goal": goal and f"<= {goal:g} s",
                          "met": met}}

    med = statistics.median
    rows = [row(f"warm single run, process wall (median of {rounds})", _median(d, "wall_s"), _median(e, "wall_s"),
                "ordinary imports", goal),
            row("warm single run, process CPU", _median(d, "process_cpu_s"), _median(e, "process_cpu_s"),
                "ordinary imports"),
            row("warm single run, the run's own record", _median(d, "own_s"), _median(e, "own_s"), "ordinary imports"),
            *([row("warm single run, process wall", _median(d, "wall_s"), _median(arms["recomputed"], "wall_s"),
                   "shift effects computed again", goal)] if "recomputed" in arms else []),
            row("a job after the first, the run's own record", med(j["own_s"] for j in later["reuse"]),
                med(j["own_s"] for j in later["rebuild"]), "no reuse (TTA_REUSE=0)", GOAL_NEXT_JOB_S),
            row("a job after the first, its CPU", med(j["own_cpu_s"] for j in later["reuse"]),
                med(j["own_cpu_s"] for j in later["rebuild"]), "no reuse (TTA_REUSE=0)")]
    title = "A warm run's start-up" + (f" ({' '.join(overrides)})" if overrides else "")
    write_measurements(path, COLUMNS, rows, title=title,
                       after=["    " + line for line in [*printed, f"R@1 of every sweep job: {recalls}"]])


if __name__ == "__main__":
    main()
