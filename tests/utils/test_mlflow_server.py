"""logger=mlflow against a real tracking server (``mlflow server`` on 127.0.0.1, SQLite backend): the run's
params, per-batch metrics and final metrics are read back through MlflowClient."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import tiny_overrides

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def mlflow_server(tmp_path):
    pytest.importorskip("mlflow", reason="mlflow is not installed: pip install -e '.[loggers]'")
    mlflow_bin = shutil.which("mlflow", path=os.path.dirname(sys.executable)) or shutil.which("mlflow")
    if mlflow_bin is None:
        pytest.skip("the mlflow command is not on PATH")
    port = _free_port()
    log = open(tmp_path / "server.log", "w")
    server = subprocess.Popen([mlflow_bin, "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
                               "--backend-store-uri", f"sqlite:///{tmp_path / 'mlflow.db'}",
                               "--default-artifact-root", str(tmp_path / "artifacts")],
                              stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 180
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(f"{url}/health", timeout=2).status == 200:
                break
        except OSError:
            time.sleep(0.5)
        assert server.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
    else:
        pytest.fail("mlflow server did not answer: " + (tmp_path / "server.log").read_text()[-3000:])
    yield url
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:  # its workers on a loaded machine: no state to keep
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=30)
    log.close()


def test_a_run_logs_params_per_batch_and_final_metrics_to_a_tracking_server(mlflow_server, tiny_cache, tmp_path):
    from mlflow.tracking import MlflowClient

    run_dir = tmp_path / "run"
    out = subprocess.run([sys.executable, "-m", "tta.run", *tiny_overrides(tiny_cache, "logger=mlflow",
                          "task_name=served", "adapter=tent", "shift=gaussian", "batch_size=16", "print_config=false"),
                          f"hydra.run.dir={run_dir}"], capture_output=True, text=True, cwd=ROOT, timeout=600,
                         env={**os.environ, "MLFLOW_TRACKING_URI": mlflow_server, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-3000:]
    assert not (run_dir / "mlruns").exists()  # everything went to the server
    import json

    results = json.loads((run_dir / "results.json").read_text())
    client = MlflowClient(tracking_uri=mlflow_server)
    [exp] = [e for e in client.search_experiments() if e.name == "served"]
    [mlrun] = client.search_runs([exp.experiment_id])
    params = mlrun.data.params
    assert params["adapter/name"] == "tent" and params["shift/name"] == "gaussian" and params["seed"] == "42"
    # MLflow metric names have no "@" (Lightning drops it): R@1 is R1
    steps = client.get_metric_history(mlrun.info.run_id, "stream/R1_step")
    assert [m.step for m in steps] == [0, 1, 2], sorted(mlrun.data.metrics)  # 40 queries in batches of 16
    assert mlrun.data.metrics["final/retrieval/R1"] == pytest.approx(results["retrieval"]["R@1"])
    assert mlrun.data.metrics["final/hubness/skewness"] == pytest.approx(results["hubness"]["skewness"])
    assert mlrun.data.tags["adapter"] == "tent" and mlrun.info.status == "FINISHED"
