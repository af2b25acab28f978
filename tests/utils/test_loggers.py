"""The run's Lightning loggers (tta/utils/loggers.py, ``logger=`` group) and the ``callbacks=`` group: CSV and
TensorBoard together, MLflow to a local store, an offline W&B run killed and resumed as one run, bad choices."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import tiny_overrides
from tests.reporting.wandb_offline import history_steps, summarize
from tta.callbacks import configured_callbacks, run_callbacks
from tta.run import run
from tta.utils.config import compose

ROOT = Path(__file__).resolve().parents[2]


def _git_head() -> tuple[str, bool]:
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return head, bool(dirty)


def test_csv_and_tensorboard_loggers_both_get_every_batch_and_the_final_metrics(tiny_cache, tmp_path):
    pytest.importorskip("tensorboard", reason="logger=tensorboard needs tensorboard: pip install -e '.[loggers]'")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    res = run(compose("run", tiny_overrides(tiny_cache, "logger=[csv,tensorboard]", "adapter=tent",
                                            "shift=gaussian")), tmp_path)
    history = json.loads((tmp_path / "history.json").read_text())
    r1 = [h["running_r1"] for h in history]
    rows = list(csv.DictReader((tmp_path / "csv" / "metrics.csv").open()))
    per_batch = [r for r in rows if r["stream/R@1_step"]]
    assert [int(r["step"]) for r in per_batch] == [0, 1, 2]
    assert [float(r["stream/R@1_step"]) for r in per_batch] == pytest.approx(r1)
    assert all(float(r["stream/skewness"]) > -10 and float(r["time/adapt_s"]) > 0 for r in per_batch)
    assert "provenance" in (tmp_path / "csv" / "hparams.yaml").read_text()

    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    scalars = events.Tags()["scalars"]
    assert {"stream/R@1_step", "adapt/loss_step", "stream/skewness", "adapt/skipped_updates"} <= set(scalars)
    tb = events.Scalars("stream/R@1_step")
    assert [e.step for e in tb] == [0, 1, 2] and [e.value for e in tb] == pytest.approx(r1, abs=1e-4)
    [final] = events.Scalars("final/retrieval/R@1")
    assert final.step == 3 and final.value == pytest.approx(res["retrieval"]["R@1"], abs=1e-4)

    prov = json.loads((tmp_path / "results.json").read_text())["provenance"]
    head, dirty = _git_head()
    assert prov["git"] == {"commit": head, "dirty": dirty}
    assert prov["device"]["type"] == "cpu" and prov["precision"] == "32-true" and prov["threads"] >= 1
    assert prov["started"] <= prov["finished"] and prov["started"].endswith("+00:00")
    from tta.stages import data_settings

    assert prov["loader_workers"] == data_settings(compose("run", tiny_overrides(tiny_cache))).workers  # `auto` resolved
    assert prov["shift_device"] == "cpu"


def test_mlflow_logs_to_a_sqlite_store_in_the_run_dir(tiny_cache, tmp_path, monkeypatch):
    pytest.importorskip("mlflow", reason="logger=mlflow needs mlflow: pip install -e '.[loggers]'")
    from mlflow.tracking import MlflowClient

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    res = run(compose("run", tiny_overrides(tiny_cache, "logger=mlflow")), tmp_path)
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    [exp] = [e for e in client.search_experiments() if e.name == "tta"]
    [mlrun] = client.search_runs([exp.experiment_id])
    assert [m.step for m in client.get_metric_history(mlrun.info.run_id, "stream/R1_step")] == [0, 1, 2]  # no @
    assert mlrun.data.metrics["final/retrieval/R1"] == pytest.approx(res["retrieval"]["R@1"])
    assert mlrun.data.tags["adapter"] == "source" and mlrun.data.tags["shift"] == "clean"


def test_a_logger_whose_package_is_missing_is_one_clear_error(tiny_cache, tmp_path):
    try:
        import mlflow  # noqa: F401

        pytest.skip("mlflow is installed: nothing is missing")
    except ImportError:
        pass
    with pytest.raises(ValueError, match=r"logger=mlflow needs a package .*pip install -e '\.\[loggers\]'"):
        run(compose("run", tiny_overrides(tiny_cache, "logger=mlflow")), tmp_path)


def test_callbacks_group_adds_to_the_runner_callbacks():
    from lightning.pytorch.callbacks import RichProgressBar

    cfg = compose("run", ["callbacks=rich_progress", "+callbacks.slow._target_=tests.utils.slow_batches.SlowBatches",
                          "+callbacks.slow.seconds=0"])
    got = run_callbacks(cfg, Path("."), None, loggers=[])
    assert [type(c).__name__ for c in got] == ["CheckpointStream", "RichProgressBar", "SlowBatches"]
    assert isinstance(got[1], RichProgressBar)
    with pytest.raises(ValueError, match="callbacks.bad has no _target_"):
        configured_callbacks(compose("run", ["+callbacks.bad.seconds=1"]).callbacks)


def test_logger_entry_without_target_is_one_line(tmp_path):
    from tta.utils.loggers import build_loggers

    with pytest.raises(ValueError, match=r"logger\.bad has no _target_: choose loggers with logger=<name>"):
        build_loggers(compose("run", ["+logger.bad.save_dir=x"]).logger, tmp_path, {}, {})


def test_config_tree_is_printed_with_its_groups(capsys):
    from tta.utils.config import print_config_tree

    print_config_tree(compose("run", ["adapter=tent"]))
    out = capsys.readouterr().out
    assert out.index("data") < out.index("adapter") and "tta.adapters.tent.TentAdapter" in out


def _run_cmd(cache: Path, run_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "tta.run", *tiny_overrides(cache, "logger=wandb", "adapter=tent", "shift=gaussian",
                                                              "batch_size=4", "checkpoint_every=1",
                                                              "print_config=false", f"hydra.run.dir={run_dir}", *extra)]


def test_wandb_run_terminated_and_resumed_is_one_run_with_continuous_steps(tiny_cache, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("WANDB_API_KEY", "WANDB_MODE")}
    env.update(HOME=str(tmp_path), WANDB_SILENT="true", OMP_NUM_THREADS="1")
    run_dir = tmp_path / "run"
    first = subprocess.Popen(_run_cmd(tiny_cache, run_dir, "+callbacks.slow._target_=tests.utils.slow_batches.SlowBatches",
                                      "+callbacks.slow.seconds=1.5"),
                             cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 600
    while not (run_dir / "resume.pt").exists() and first.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    assert first.poll() is None, first.stderr.read().decode()[-3000:]
    time.sleep(1.0)
    # SIGTERM (a scheduler's preemption): the batch in flight ends, the loggers are closed and flushed. A SIGKILL
    # leaves the W&B offline file of that attempt without the rows its service had not written yet.
    first.send_signal(signal.SIGTERM)
    first.wait(timeout=120)
    assert not (run_dir / "results.json").exists() and (run_dir / "resume.pt").exists()
    second = subprocess.run(_run_cmd(tiny_cache, run_dir), cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=900)
    assert second.returncode == 0, second.stderr[-3000:]
    res = json.loads((run_dir / "results.json").read_text())
    assert res["time_s"]["resumed_at_batch"] >= 1
    attempts = history_steps(run_dir)
    assert len(attempts) == 2 and attempts[0][0] == attempts[1][0]  # one run id: one W&B run
    (_, before), (_, after) = attempts
    assert before and before == list(range(len(before)))
    assert after == list(range(res["time_s"]["resumed_at_batch"], 10))  # continues at the checkpoint
    assert after[0] <= before[-1] + 1  # no gap
    first_rec, last = (summarize(f) for f in sorted((run_dir / "wandb").glob("offline-run-*/run-*.wandb")))
    assert first_rec["exit_code"] == 1  # the interrupted attempt is closed, marked failed
    assert last["exit_code"] == 0 and last["summary"]["retrieval/R@1"] == pytest.approx(res["retrieval"]["R@1"])


def test_lightning_lines_print_once():
    """Lightning's top package has a console handler of its own and propagates to the root's (Hydra's): one goes."""
    import logging

    import lightning

    from tta.utils.logs import quiet_lightning

    root = logging.getLogger()
    added = logging.StreamHandler() if not root.handlers else None
    if added is not None:
        root.addHandler(added)
    try:
        quiet_lightning()
        top = logging.getLogger(lightning.__name__)
        assert top.propagate and not [h for h in top.handlers if type(h) is logging.StreamHandler]
    finally:
        if added is not None:
            root.removeHandler(added)
