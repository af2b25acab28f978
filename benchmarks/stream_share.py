"""How much of a run's query stream a video shift costs: the perturbation's share, with and without the motion store.

    python benchmarks/stream_share.py                   # v2t CLIP4Clip, source and HAT-VTR, motion blur s5, 300 queries
    python benchmarks/stream_share.py --adapters source --rounds 3 model.arch=ViT-B-32 model.checkpoint=none
    python benchmarks/stream_share.py --shift gaussian --severity 3          # a shift without a store: two arms

Each round runs ``python -m tta.run`` once per arm and adapter, as subprocesses, interleaved so that the machine's
drift reaches every arm alike:

- ``clean``: no shift;
- ``off``: the shift with ``shift.motion_store=false``, every flow computed (what a run over clips the store does not
  hold yet pays; a first run with the store pays that plus about 2 ms per clip for the hash and the write);
- ``warm``: the shift with the store after a run that filled it (that fill run is not reported): every clip's motion
  is linked to the frame cache's clip, so no video is decoded whole (docs/shifts/mlvp.md, "Speed").

The store arms exist for the flow blurs only. Stream time is ``time_s.per_query_ms`` of each run's results.json; the
perturbation's share is 1 - clean / shifted. The shifted arms must score the same (the store changes no bit); the
table says whether they did. Any tta.run override may follow the options (model, data, accelerator, workers). This
is a measurement script, not a test: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STORED = ("motion_blur", "video_defocus")


def arms(shift: str) -> list[str]:
    """The arms measured for ``shift``, in the order each round runs them (``fill`` precedes ``warm``)."""
    return ["clean", "off", "fill", "warm"] if shift in STORED else ["clean", "off"]


def arm_overrides(arm: str, shift: str, severity: int) -> list[str]:
    if arm == "clean":
        return ["shift=clean"]
    store = "false" if arm == "off" else "true"
    return [f"shift={shift}", f"shift.severity={severity}", f"shift.motion_store={store}"]


def share(clean_ms: float, shifted_ms: float) -> float:
    """The share of the shifted stream's time that the perturbation adds: 1 - clean / shifted."""
    return 1.0 - clean_ms / shifted_ms


def summarise(rows: list[dict]) -> list[dict]:
    """Per adapter: the mean ms/query of each reported arm over the rounds, each round's values, the shares of the
    means and whether every shifted run scored the same R@1. ``rows``: dicts with adapter, arm, ms, r1."""
    out = []
    for adapter in dict.fromkeys(r["adapter"] for r in rows):
        mine = [r for r in rows if r["adapter"] == adapter and r["arm"] != "fill"]
        ms = {arm: [r["ms"] for r in mine if r["arm"] == arm] for arm in dict.fromkeys(r["arm"] for r in mine)}
        mean = {arm: statistics.fmean(v) for arm, v in ms.items()}
        shifted_r1 = {r["r1"] for r in mine if r["arm"] != "clean"}
        out.append({"adapter": adapter, "ms": ms, "mean": mean,
                    "share": {arm: share(mean["clean"], m) for arm, m in mean.items() if arm != "clean"},
                    "r1": {arm: next(r["r1"] for r in mine if r["arm"] == arm) for arm in ms},
                    "same_scores": len(shifted_r1) == 1})
    return out


def markdown(summary: list[dict]) -> str:
    reported = [a for a in ("clean", "off", "warm") if a in summary[0]["ms"]]
    head = ["adapter", *(f"{a} ms/query" for a in reported), *(f"share, {a}" for a in reported if a != "clean"),
            "R@1 clean / shifted", "shifted arms score the same"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 3) + "---|---|"]
    for s in summary:
        cells = [s["adapter"]]
        cells += [f"{s['mean'][a]:.1f} ({', '.join(f'{v:.1f}' for v in s['ms'][a])})" for a in reported]
        cells += [f"{round(100 * s['share'][a]) + 0} %" for a in reported if a != "clean"]  # no "-0 %"
        cells += [f"{s['r1']['clean']:.2f} / {s['r1']['off']:.2f}", "yes" if s["same_scores"] else "**no**"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run_arm(out: Path, tag: str, overrides: list[str]) -> dict:
    """One ``python -m tta.run`` in ``out/tag``; its stream ms/query and R@1."""
    cmd = [sys.executable, "-m", "tta.run", f"hydra.run.dir={out / tag}", "skip_complete=false", "resume=false",
           *overrides]
    with open(out / f"{tag}.log", "w") as log:
        code = subprocess.run(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT).returncode
    if code != 0:
        sys.exit(f"error: {' '.join(cmd[1:])} failed (exit {code}); its log: {out / f'{tag}.log'}")
    res = json.loads((out / tag / "results.json").read_text())
    prov = res.get("provenance", {})
    return {"ms": float(res["time_s"]["per_query_ms"]), "r1": float(res["retrieval"]["R@1"]),
            "workers": prov.get("loader_workers"), "shift_device": prov.get("shift_device")}


def where_perturbed(rows: list[dict]) -> str:
    """Where the shifted arms perturbed, from their results' provenance: the share depends on it."""
    seen = sorted({(r.get("workers"), r.get("shift_device")) for r in rows if r["arm"] != "clean"}, key=str)
    return "; ".join(f"{w if w is not None else '?'} loader worker(s), shift device {d or '?'}" for w, d in seen)


def measure(adapters: list[str], shift: str, severity: int, rounds: int, common: list[str], out: Path,
            run: Callable[[Path, str, list[str]], dict] = run_arm) -> list[dict]:
    rows = []
    for r in range(rounds):
        for adapter in adapters:
            for arm in arms(shift):
                got = run(out, f"r{r}-{adapter}-{arm}", [*common, f"adapter={adapter}",
                                                        *arm_overrides(arm, shift, severity)])
                rows.append({"round": r, "adapter": adapter, "arm": arm, **got})
                print(f"round {r} {adapter} {arm}: {got['ms']:.2f} ms/query, R@1 {got['r1']:.2f}", flush=True)
    return rows


def commit() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "tta"], cwd=REPO, capture_output=True, text=True)
        return rev.stdout.strip() + (" with uncommitted changes under tta/" if dirty.stdout.strip() else "")
    except OSError:
        return "unknown"


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--adapters", nargs="+", default=["source", "hatvtr"])
    parser.add_argument("--shift", default="motion_blur")
    parser.add_argument("--severity", type=int, default=5)
    parser.add_argument("--subset", type=int, default=300, help="queries per run (data.subset)")
    parser.add_argument("--task", default="v2t")
    parser.add_argument("--model", default="clip4clip")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", help="directory of the runs' logs and results (default: a new temporary one)")
    parser.add_argument("--json", help="also write the rows and the summary here")
    args, overrides = parser.parse_known_args(argv)
    if args.rounds < 1 or args.subset < 1:
        sys.exit("error: --rounds and --subset must be at least 1")
    out = Path(args.out or tempfile.mkdtemp(prefix="tta-stream-share-"))
    out.mkdir(parents=True, exist_ok=True)
    common = [f"task={args.task}", f"model={args.model}", f"data.subset={args.subset}", *overrides]
    started = dt.datetime.now(dt.timezone.utc)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    rows = measure(args.adapters, args.shift, args.severity, args.rounds, common, out)
    summary = summarise(rows)
    ended = dt.datetime.now(dt.timezone.utc)
    print(f"\n`python benchmarks/stream_share.py {' '.join(argv if argv is not None else sys.argv[1:])}` at commit "
          f"{commit()}, {started:%Y-%m-%d %H:%M}-{ended:%H:%M} UTC; {os.cpu_count()} cores, load average "
          f"{load:.2f} at the start and {os.getloadavg()[0]:.2f} at the end; tta.run {' '.join(common)}; shift "
          f"{args.shift} severity {args.severity} ({where_perturbed(rows)}); ms/query: mean (each round)\n")
    print(markdown(summary))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "summary": summary, "common": common}, indent=1))
    return summary


if __name__ == "__main__":
    main()
