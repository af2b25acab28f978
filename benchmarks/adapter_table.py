"""Adapter comparison table on the embedded benchmark (R@1 and k-occurrence skewness per configuration).

Usage examples:
    python benchmarks/adapter_table.py --adapters source tcr hsm hatvtr --models clip4clip xpool \
        --cells v2t:gaussian:5 t2v:clean:0
    python benchmarks/adapter_table.py --adapters hatvtr --models clip4clip --cells v2t:gaussian:5 \
        --variant "no HSM=adapter.method.hsm.enabled_select=false,adapter.method.hsm.enabled_refine=false"
    python benchmarks/adapter_table.py --adapters source hatvtr --cells v2t:clean:0 --jsonl rows.jsonl scenario=cross

Each (variant or adapter) x model x cell runs ``tta.run`` in-process; rows print as a Markdown table with the
share of negative similarities and the per-query adaptation time. With ``--jsonl`` every finished row is appended
to that file at once and rows already there are skipped, so an interrupted table resumes where it stopped.
Nothing is tuned here: defaults come from conf/.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch

from tta.run import run
from tta.utils.config import compose

HEADER = ("| config | model | task | shift | R@1 | R@5 | skewness (k=10) | % sims < 0 | ms/query |\n"
          "|---|---|---|---|---|---|---|---|---|")


def row_line(r: dict) -> str:
    return (f"| {r['config']} | {r['model']} | {r['task']} | {r['shift']} {r['severity']} | {r['R@1']:.1f} | "
            f"{r['R@5']:.1f} | {r['skewness']:.2f} | {100 * r['neg_share']:.2f} | {r['ms_per_query']:.1f} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--adapters", nargs="*", default=[])
    ap.add_argument("--models", nargs="+", default=["clip4clip"])
    ap.add_argument("--cells", nargs="+", default=["v2t:gaussian:5"], help="task:shift:severity")
    ap.add_argument("--variant", action="append", default=[], help='"label=override1,override2" (adapter via override)')
    ap.add_argument("--json", default=None, help="also write all rows to this JSON file at the end")
    ap.add_argument("--jsonl", default=None, help="append each row to this file as it finishes; skip rows already in it")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides for every run (e.g. scenario=cross data=synth_b)")
    args = ap.parse_args()
    configs = [(a, [f"adapter={a}"]) for a in args.adapters]
    for v in args.variant:
        label, _, over = v.partition("=")
        configs.append((label, [o for o in over.split(",") if o]))
    done = {}
    if args.jsonl and Path(args.jsonl).exists():
        for line in Path(args.jsonl).read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                done[r["key"]] = r
    print(HEADER, flush=True)
    rows = []
    for label, over in configs:
        for model in args.models:
            for cell in args.cells:
                task, shift, sev = cell.split(":")
                extra = [f"model={model}", f"task={task}", f"shift={shift}", "save.sims=true",
                         "trainer.enable_progress_bar=false", *over, *args.overrides]
                if shift != "clean":
                    extra.append(f"shift.severity={sev}")
                key = json.dumps([label, extra])
                if key in done:
                    rows.append(done[key])
                    print(row_line(done[key]), flush=True)
                    continue
                with tempfile.TemporaryDirectory() as d:
                    res = run(compose("run", extra), d)
                    sims = torch.load(f"{d}/sims.pt").float()
                r = {"key": key, "config": label, "model": model, "task": task, "shift": shift, "severity": int(sev),
                     "scenario": res.get("scenario"), "data": res["data"], "train_data": res.get("train_data"),
                     "R@1": res["retrieval"]["R@1"], "R@5": res["retrieval"]["R@5"],
                     "skewness": res["hubness"]["skewness"], "neg_share": float((sims < 0).float().mean()),
                     "ms_per_query": res["time_s"]["per_query_ms"], "counters": res.get("counters", {}),
                     "skipped": res.get("skipped", {}).get("n", 0)}
                if res.get("segments"):  # a stream: R@1 / R@5 / skewness of each of its shifts
                    r["segments"] = [{"shift": g["shift"], "severity": g["severity"], "R@1": g["retrieval"]["R@1"],
                                      "R@5": g["retrieval"]["R@5"], "skewness": g["hubness"]["skewness"]}
                                     for g in res["segments"]]
                rows.append(r)
                print(row_line(r), flush=True)
                if args.jsonl:
                    with open(args.jsonl, "a") as f:
                        f.write(json.dumps(r) + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
