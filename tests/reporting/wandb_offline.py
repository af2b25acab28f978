"""Read a W&B offline run file (``run-<id>.wandb``) without network or wandb's service, for tests.

The file is a LevelDB-style log (wandb's own writer): a 7-byte header (``:W&B``, magic 0xBEE1, version 0), then
32 KiB blocks of chunks, each ``crc32c (4) | length (2, LE) | type (1) | payload``; types 1 = full record,
2/3/4 = first/middle/last piece. Every record is a ``wandb_internal_pb2.Record`` protobuf.
"""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path

BLOCK = 32768
HEADER = 7


def read_records(path: str | Path) -> list:
    from wandb.proto import wandb_internal_pb2 as pb

    data = Path(path).read_bytes()
    if data[:4] != b":W&B":
        raise ValueError(f"{path} is not a W&B run file")
    records, pending, pos = [], b"", HEADER
    while pos + 7 <= len(data):
        left = BLOCK - pos % BLOCK
        if left < 7:  # block trailer padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        payload = data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind == 0 and length == 0:
            continue
        if kind == 1:
            pending = payload
        elif kind == 2:
            pending = payload
            continue
        elif kind == 3:
            pending += payload
            continue
        elif kind == 4:
            pending += payload
        rec = pb.Record()
        rec.ParseFromString(pending)
        records.append(rec)
    return records


def finished_records(path: str | Path, timeout: float = 30.0) -> list:
    """The records of a finished run file. wandb's writer (wandb-core) may still be flushing when ``finish()``
    returns, so this waits until the file holds both its run record and its exit record; a file that never does
    fails with the record kinds it has."""
    deadline = time.monotonic() + timeout
    while True:
        records = read_records(path)
        kinds = [r.WhichOneof("record_type") for r in records]
        if "run" in kinds and "exit" in kinds:
            return records
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} has no complete run after {timeout:.0f} s; its records: {kinds}")
        time.sleep(0.5)


def summarize(path: str | Path) -> dict:
    """{"run": {...}, "config": {key: value}, "history": [ {key: value} ], "summary": {key: value}, "exit_code",
    "metrics": {name: {"step_metric", "summary"}} (define_metric), "artifacts": [{"name", "type", "files"}]}."""
    out = {"run": {}, "config": {}, "history": [], "summary": {}, "exit_code": None, "metrics": {}, "artifacts": []}
    for rec in finished_records(path):
        kind = rec.WhichOneof("record_type")
        if kind == "run":
            out["run"] = {"project": rec.run.project, "group": rec.run.run_group, "name": rec.run.display_name,
                          "id": rec.run.run_id, "tags": list(rec.run.tags), "job_type": rec.run.job_type}
            for item in rec.run.config.update:
                out["config"][item.key] = json.loads(item.value_json)
        elif kind == "config":
            for item in rec.config.update:
                out["config"][item.key] = json.loads(item.value_json)
        elif kind == "history":
            out["history"].append({(i.key or "/".join(i.nested_key)): json.loads(i.value_json)
                                   for i in rec.history.item})
        elif kind == "exit":
            out["exit_code"] = rec.exit.exit_code
        elif kind == "summary":
            for item in rec.summary.update:
                out["summary"][item.key or "/".join(item.nested_key)] = json.loads(item.value_json)
        elif kind == "metric" and rec.metric.name:
            summary = [f.name for f, v in rec.metric.summary.ListFields() if v]
            out["metrics"][rec.metric.name] = {"step_metric": rec.metric.step_metric, "summary": summary}
        elif kind == "artifact":
            out["artifacts"].append({"name": rec.artifact.name, "type": rec.artifact.type,
                                     "files": [c.path for c in rec.artifact.manifest.contents]})
    return out


def history_steps(run_dir: str | Path) -> list[tuple[str, list[int]]]:
    """(run id, the ``_step`` of its per-batch rows) of each offline attempt under ``run_dir/wandb``, oldest first."""
    files = sorted(Path(run_dir, "wandb").glob("offline-run-*/run-*.wandb"))
    out = []
    for f in files:
        rec = summarize(f)
        out.append((rec["run"]["id"], [h["_step"] for h in rec["history"] if "stream/R@1_step" in h]))
    return out
