"""Start-up: the seconds a warm run spends outside its query stream, with the deferred imports and without.

    python benchmarks/startup.py                     # 2 rounds x (deferred, eager) of one warm run, then a 3-job sweep
    python benchmarks/startup.py --rounds 3 --jobs 4 adapter=hatvtr     # any tta.run override after the options

Arms, interleaved per round so that the machine's drift reaches both alike:

- ``deferred``: ``python -m tta.run`` as shipped (tta/utils/lazy_imports.py defers Lightning's import of every
  torchmetrics family);
- ``eager``: the same with ``TTA_EAGER_IMPORTS=1`` (the ordinary imports: the "before").

Each is a subprocess on a warm cache (a first run fills it and is not reported). Outside the stream = the
process's wall time - ``time_s.stream`` of its results.json (imports, config, model, screening, gallery from the
cache, scoring and writing). Then one process runs ``--jobs`` runs one after another (an in-process sweep, as
Hydra's basic launcher does): each job's outside-the-stream seconds are ``time_s.total - time_s.stream`` (the
process's imports fall before the first job's clock; they are reported separately). Printed: the medians, their
ratio, and against the goals (<= 6 s for a warm single run, <= 2 s for a job after the first). A measurement
script, not a test: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GOAL_SINGLE_S, GOAL_NEXT_JOB_S = 6.0, 2.0


def single_run(overrides: list[str], eager: bool, out: Path) -> dict:
    """One ``python -m tta.run`` process: its wall seconds, stream seconds and outside-the-stream seconds."""
    env = dict(os.environ)
    env.pop("TTA_EAGER_IMPORTS", None)
    if eager:
        env["TTA_EAGER_IMPORTS"] = "1"
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "tta.run", f"hydra.run.dir={out}", "print_config=false",
                           "skip_complete=false", *overrides], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"error: the run failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    t = json.loads((out / "results.json").read_text())["time_s"]
    stream = float(t.get("stream", t["adapt"]))
    return {"wall_s": wall, "stream_s": stream, "outside_s": wall - stream, "setup_s": float(t["total"]) - stream}


SWEEP = """
import json, sys, time
t0 = time.perf_counter()
from tta.run import run
from tta.utils.config import compose
imported = time.perf_counter() - t0
jobs = []
for i in range(int(sys.argv[1])):
    res = run(compose("run", ["print_config=false", "skip_complete=false", *sys.argv[3:]]), f"{sys.argv[2]}/job{i}")
    t = res["time_s"]
    jobs.append({"total_s": t["total"], "stream_s": t["stream"], "outside_s": t["total"] - t["stream"]})
print(json.dumps({"import_s": imported, "jobs": jobs}))
"""


def sweep(overrides: list[str], jobs: int, out: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", SWEEP, str(jobs), str(out), *overrides], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        sys.exit(f"error: the in-process sweep failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=3, help="runs of the in-process sweep")
    parser.add_argument("--json", help="also write the measurements here")
    args, overrides = parser.parse_known_args(argv)
    if args.rounds < 1 or args.jobs < 2:
        sys.exit("error: --rounds must be at least 1 and --jobs at least 2")
    work = Path(tempfile.mkdtemp(prefix="tta-startup-"))
    print(f"warm-up run (fills the cache; not reported): {' '.join(overrides) or 'defaults'}", flush=True)
    single_run(overrides, False, work / "warm")
    arms: dict[str, list[dict]] = {"deferred": [], "eager": []}
    for r in range(args.rounds):
        for arm in arms:
            m = single_run(overrides, arm == "eager", work / f"{arm}{r}")
            arms[arm].append(m)
            print(f"round {r + 1} {arm:8s}: wall {m['wall_s']:5.1f} s, stream {m['stream_s']:5.1f} s, outside the "
                  f"stream {m['outside_s']:5.1f} s", flush=True)
    med = {a: statistics.median(m["outside_s"] for m in ms) for a, ms in arms.items()}
    print(f"\nwarm single run, outside the stream (median of {args.rounds}): deferred {med['deferred']:.1f} s, eager "
          f"{med['eager']:.1f} s, ratio {med['deferred'] / med['eager']:.2f}; goal <= {GOAL_SINGLE_S:.0f} s: "
          f"{'met' if med['deferred'] <= GOAL_SINGLE_S else 'not met'}")
    sw = sweep(overrides, args.jobs, work / "sweep")
    later = [j["outside_s"] for j in sw["jobs"][1:]]
    print(f"in-process sweep of {args.jobs} jobs: imports {sw['import_s']:.1f} s; outside the stream per job "
          + ", ".join(f"{j['outside_s']:.1f}" for j in sw["jobs"])
          + f" s; a job after the first {statistics.median(later):.1f} s (ratio to the first job "
          f"{statistics.median(later) / max(sw['jobs'][0]['outside_s'], 1e-9):.2f}); goal <= {GOAL_NEXT_JOB_S:.0f} s: "
          f"{'met' if statistics.median(later) <= GOAL_NEXT_JOB_S else 'not met'}")
    result = {"single": arms, "sweep": sw, "overrides": overrides, "cores": os.cpu_count()}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
