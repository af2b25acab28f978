"""Sweeps, loggers and reports.

A real multirun of the CLI with hydra-submitit-launcher's local launcher over 3 adapters x 2 shifts on the tiny
embedded benchmark; the report built from it; re-running the sweep skips finished jobs; a failing job keeps the
others' results; the CSV and W&B (offline) loggers; the analysis notebook executed on the sweep.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import tiny_overrides
from tests.reporting.wandb_offline import summarize
from tta.report import main as report_main
from tta.reporting.full_report import build_report
from tta.run import run
from tta.utils.config import compose
from tta.utils.sweep import job_dirname, sweep_choice_error

ROOT = Path(__file__).resolve().parents[2]
ADAPTERS = ("source", "tent", "hsm")
SHIFTS = ("clean", "gaussian")


def _multirun(cache, sweep_dir, *args, launcher="submitit_local"):
    cmd = [sys.executable, "-m", "tta.run", "-m", f"hydra/launcher={launcher}", *tiny_overrides(cache),
           f"hydra.sweep.dir={sweep_dir}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=1500, cwd=ROOT)


@pytest.fixture(scope="module")
def sweep(tiny_cache, tmp_path_factory):
    sweep_dir = tmp_path_factory.mktemp("sweep")
    out = _multirun(tiny_cache, sweep_dir, f"adapter={','.join(ADAPTERS)}", f"shift={','.join(SHIFTS)}",
                    "shift.severity=5")
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    return sweep_dir, out


@pytest.mark.slow
def test_sweep_writes_one_result_per_job_and_a_line_per_job(sweep):
    sweep_dir, out = sweep
    results = sorted(sweep_dir.rglob("results.json"))
    assert len(results) == len(ADAPTERS) * len(SHIFTS)
    combos = {(json.loads(f.read_text())["adapter"], json.loads(f.read_text())["shift"]) for f in results}
    assert combos == {(a, s) for a in ADAPTERS for s in SHIFTS}
    logs = "".join(p.read_text() for p in sweep_dir.rglob("*_log.*"))  # submitit job logs
    assert logs.count("OK ") == len(ADAPTERS) * len(SHIFTS)
    for f in results:
        assert (f.parent / "sims_head.pt").exists() and (f.parent / "k_occurrence.json").exists()


@pytest.mark.slow
def test_report_tables_equal_results_and_has_plots_and_html(sweep, tmp_path):
    sweep_dir, _ = sweep
    rep = build_report(sweep_dir, tmp_path / "report")
    [table] = rep["tables"]
    frame = table.frame
    for f in sweep_dir.rglob("results.json"):
        res = json.loads(f.read_text())
        level = "clean" if res["shift"] == "clean" else "low-level"
        assert frame.loc[(res["model"], res["adapter"]), (level, res["shift"])] == pytest.approx(res["retrieval"]["R@1"])
        src = json.loads(f.read_text())
        assert src["hubness"]["skewness"] >= -10
    for adapter in ADAPTERS:  # Avg over the shifted columns only (clean is not averaged)
        assert frame.loc[("clip4clip", adapter), ("", "Avg")] == pytest.approx(frame.loc[("clip4clip", adapter),
                                                                                         ("low-level", "gaussian")])
    md = (tmp_path / "report" / "tables.md").read_text()
    assert "| clip4clip | hatvtr |" not in md and "| clip4clip | tent |" in md
    assert md.index("| clip4clip | source |") < md.index("| clip4clip | tent |") < md.index("| clip4clip | hsm |")
    assert r"\begin{tabular}" in (tmp_path / "report" / "tables.tex").read_text()
    assert "low-level/gaussian" in (tmp_path / "report" / "tables.csv").read_text()
    rob = rep["robustness"]
    src_clean = frame.loc[("clip4clip", "source"), ("clean", "clean")]
    tent = rob[rob["adapter"] == "tent"].iloc[0]
    assert tent["scope"] == "overall" and tent["clean"] == pytest.approx(src_clean)
    assert tent["relative_robustness"] == pytest.approx(1 - (src_clean - frame.loc[("clip4clip", "tent"),
                                                                                    ("low-level", "gaussian")]) / src_clean)
    names = {p.name.split("_")[0] for p in rep["figures"]}
    assert {"kocc", "sims"} <= names
    page = rep["html"].read_text()
    assert page.count("data:image/png;base64,") == len(rep["figures"]) and "<table>" in page
    assert report_main([str(sweep_dir), "--out", str(tmp_path / "cli")]) == 0
    assert (tmp_path / "cli" / "index.html").exists()


@pytest.mark.slow
def test_rerunning_a_sweep_skips_complete_jobs_and_failures_do_not_lose_results(sweep, tiny_cache, tmp_path):
    sweep_dir, _ = sweep
    stamps = {f: f.stat().st_mtime_ns for f in sweep_dir.rglob("results.json")}
    again = _multirun(tiny_cache, sweep_dir, f"adapter={','.join(ADAPTERS)}", f"shift={','.join(SHIFTS)}",
                      "shift.severity=5", launcher="local")
    assert again.returncode == 0, again.stderr[-3000:]
    assert {f: f.stat().st_mtime_ns for f in sweep_dir.rglob("results.json")} == stamps
    assert (again.stdout + again.stderr).count("skipped (complete)  ") == len(stamps)
    assert f"{len(stamps)} jobs: {len(stamps)} skipped (complete)" in again.stdout + again.stderr
    # a sweep with one failing job (severity 9 does not exist): the other job's results survive
    bad_dir = tmp_path / "bad"
    bad = _multirun(tiny_cache, bad_dir, "adapter=source", "shift=gaussian", "shift.severity=5,9", launcher="local")
    assert bad.returncode != 0
    assert len(list(bad_dir.rglob("results.json"))) == 1
    [err] = list(bad_dir.rglob("error.txt"))
    assert "severity 9 is out of range" in err.read_text()
    assert "FAILED" in bad.stdout + bad.stderr
    rep = build_report(bad_dir, tmp_path / "bad-report")
    assert len(rep["failures"]) == 1 and "Failed jobs" in rep["html"].read_text()
    # a misspelt choice in the sweep ends it before its first job, with one line
    typo = _multirun(tiny_cache, tmp_path / "typo", "adapter=source,sorce", "shift=gaussian", launcher="local")
    assert typo.returncode == 2, typo.stderr[-3000:]
    assert typo.stderr.startswith("error: the sweep's adapter= has 'sorce', not a config of 'adapter'; its options")
    assert not list((tmp_path / "typo").rglob("*.json")) and "Traceback" not in typo.stderr


def test_a_misspelt_choice_anywhere_in_a_sweep_is_found_before_the_first_job():
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from omegaconf import open_dict

    from tta.utils.config import CONF_DIR

    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = hydra_compose("run", ["experiment=seeds"], return_hydra_config=True)
        assert sweep_choice_error(cfg) is None
        with open_dict(cfg):
            cfg.hydra.sweeper.params.adapter = "source,hatvrt,hatvrt_gate"  # an experiment's own sweep
            assert sweep_choice_error(cfg) == (
                "the sweep's adapter= has 'hatvrt', 'hatvrt_gate', not a config of 'adapter'; its options are: dsl, "
                "eata, hatvtr, hatvtr_gate, hatvtr_hubloss, hsm, noregret, qbnorm, read, sar, source, tcr, tent")
            cfg.hydra.sweeper.params.adapter = "hatvrt"  # one value of the params: applied per job, checked too
            assert sweep_choice_error(cfg).startswith("the sweep's adapter= has 'hatvrt', not a config of 'adapter'")
            cfg.hydra.sweeper.params.adapter = "source,hatvtr"
            cfg.hydra.overrides.task = ["shift@gallery_shift=clean,gausian"]  # the command line's, a packaged group
            assert sweep_choice_error(cfg).startswith("the sweep's shift@gallery_shift= has 'gausian', not a config "
                                                      "of 'shift'; its options are: active, ")
            cfg.hydra.overrides.task = ["adapter.lr=0.1,0.2", "logger=[csv],[csv,wandb]", "shift=glob(gauss*)",
                                        "hydra/launcher=basic,local", "debug=tiny", "logger=[csv,wandb]",
                                        "~tags"]  # keys, lists, globs, deletions: all valid
            assert sweep_choice_error(cfg) is None
            cfg.hydra.overrides.task = ["logger=[csv],[csv,wandbb]"]
            assert sweep_choice_error(cfg).startswith("the sweep's logger= has 'wandbb', not a config of 'logger'")


def test_job_dirnames_are_stable_short_and_unique():
    assert job_dirname("adapter=tcr,shift=fog") == "adapter=tcr,shift=fog"
    long_a, long_b = "x" * 300 + "a", "x" * 300 + "b"
    a, b = job_dirname(long_a, "clip4clip_tcr_fog_s5_seed42"), job_dirname(long_b, "clip4clip_tcr_fog_s5_seed42")
    assert a != b and a.startswith("clip4clip_tcr_fog_s5_seed42-") and len(a) < 100
    assert job_dirname(long_a, "id") == job_dirname(long_a, "id")
    assert "/" not in job_dirname("paths.cache_dir=/tmp/x")


def test_csv_logger_rows_match_the_history(tiny_cache, tmp_path):
    res = run(compose("run", tiny_overrides(tiny_cache, "logger=csv", "adapter=tent", "shift=gaussian")), tmp_path)
    rows = list(csv.DictReader((tmp_path / "csv" / "metrics.csv").open()))
    history = json.loads((tmp_path / "history.json").read_text())
    batches = [r for r in rows if r.get("stream/R@1_step")]
    assert [int(r["step"]) for r in batches] == [h["batch"] for h in history] == [0, 1, 2]
    assert [float(r["stream/R@1_step"]) for r in batches] == pytest.approx([h["running_r1"] for h in history])
    assert [float(r["adapt/loss_step"]) for r in batches] == pytest.approx([h["losses"][-1] for h in history])
    assert all(r["stream/skewness"] for r in batches)
    [final] = [r for r in rows if r.get("final/retrieval/R@1")]
    assert int(final["step"]) == 3 and float(final["final/retrieval/R@1"]) == pytest.approx(res["retrieval"]["R@1"])


def test_wandb_offline_run_has_config_history_and_summary(tiny_cache, tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc: mode=auto must choose offline
    monkeypatch.setenv("WANDB_SILENT", "true")
    res = run(compose("run", tiny_overrides(tiny_cache, "logger=wandb", "adapter=hatvtr", "shift=gaussian",
                                            "shift.severity=5", "tags=[nightly]")), tmp_path)
    [file] = list((tmp_path / "wandb").glob("offline-run-*/run-*.wandb"))
    rec = summarize(file)
    assert rec["run"]["group"] == "synth-v2t-gaussian-s5" and rec["run"]["name"] == "hatvtr-clip4clip-seed42"
    assert {"hatvtr", "clip4clip", "qs", "nightly"} <= set(rec["run"]["tags"])
    assert rec["config"]["adapter"]["name"] == "hatvtr" and rec["config"]["seed"] == 42
    assert rec["config"]["provenance"]["precision"] == "32-true"
    batches = [h for h in rec["history"] if "stream/R@1_step" in h]
    assert [h["_step"] for h in batches] == [h["trainer/global_step"] for h in batches] == [0, 1, 2]
    assert batches[-1]["stream/R@1_step"] == pytest.approx(res["retrieval"]["R@1"])
    assert all("stream/skewness" in h and "adapt/loss_step" in h for h in batches)
    assert any(k.startswith("adapt/L_") or k == "adapt/gate_factor" for h in batches for k in h)  # loss terms
    assert all(0 <= h["stream/selected_frac"] <= 1 for h in batches if "stream/selected_frac" in h)
    assert rec["summary"]["retrieval/R@1"] == pytest.approx(res["retrieval"]["R@1"])
    assert rec["summary"]["hubness/skewness"] == pytest.approx(res["hubness"]["skewness"])
    assert rec["summary"]["provenance/host"] == res["provenance"]["host"]
    media = {k.split("/")[0]: v for h in rec["history"] for k, v in h.items() if k.endswith("/_type")}
    assert media == {"summary_table": "table-file", "k_occurrence": "histogram", "sims_head": "image-file"}
    assert {"stream/R@1_step", "adapt/loss_step"} <= set(rec["metrics"])  # define_metric: summaries and x-axis
    assert rec["metrics"]["stream/R@1_step"]["step_metric"] == "trainer/global_step"
    [art] = [a for a in rec["artifacts"] if a["type"] == "run"]
    assert art["name"] == f"run-{rec['run']['id']}" and {"results.json", "config.yaml"} <= set(art["files"])
    assert rec["exit_code"] == 0


def test_wandb_finishes_when_the_run_fails(tiny_cache, tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    from tta.adapters.base import OnlineAdapter

    def boom(self, batch, batch_idx):
        raise RuntimeError("adapter exploded")

    monkeypatch.setattr(OnlineAdapter, "test_step", boom)
    with pytest.raises(RuntimeError, match="adapter exploded"):
        run(compose("run", tiny_overrides(tiny_cache, "logger=wandb")), tmp_path)
    [file] = list((tmp_path / "wandb").glob("offline-run-*/run-*.wandb"))
    rec = summarize(file)
    assert rec["run"]["name"] == "source-clip4clip-seed42"
    assert rec["exit_code"] == 1  # finished and marked failed, not left open


@pytest.mark.slow
def test_analysis_notebook_runs_on_the_sweep(sweep, tmp_path):
    nbformat = pytest.importorskip("nbformat", reason="the notebook test needs the 'report' extra (nbformat)")
    from nbclient import NotebookClient

    sweep_dir, _ = sweep
    nb = nbformat.read(ROOT / "notebooks" / "analysis.ipynb", as_version=4)
    env = {"TTA_SWEEP_DIR": str(sweep_dir), "TTA_REPORT_OUT": str(tmp_path)}
    os.environ.update(env)
    # where Jupyter opens it: the notebook finds the project from notebooks/
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    outputs = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    md = (tmp_path / "notebook_table.md").read_text()
    assert "| clip4clip | source |" in md and md in outputs
    assert (tmp_path / "notebook_kocc.png").exists()


def test_launcher_configs_and_cluster_overlay_compose():
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):
        slurm = hydra_compose("run", ["hydra/launcher=slurm"], return_hydra_config=True)
        local = hydra_compose("run", ["hydra/launcher=local"], return_hydra_config=True)
    assert slurm.hydra.launcher._target_.endswith("SlurmLauncher") and slurm.hydra.launcher.gpus_per_node == 1
    assert local.hydra.launcher._target_.endswith("BasicLauncher")
    out = subprocess.run([sys.executable, "-m", "tta.run", "--cfg", "hydra", "--config-dir", "launch",
                          "hydra/launcher=example_cluster"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "partition: gpu" in out.stdout and "account: my_project" in out.stdout and "SlurmLauncher" in out.stdout


def test_paper_table_experiments_name_registered_shifts_and_compose():
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from tta.shifts import text_shift_names, video_shift_names

    conf = ROOT / "conf" / "experiment"

    with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):
        t1 = hydra_compose("run", ["experiment=paper-table1-qs-v2t-msrvtt"], return_hydra_config=True)
        t3 = hydra_compose("run", ["experiment=paper-table3-qs-t2v-msrvtt"], return_hydra_config=True)
    video = t1.hydra.sweeper.params["shift"].split(",")
    text = t3.hydra.sweeper.params["shift"].split(",")
    assert len(video) == 12 and len(text) == 15 and (conf / "paper-table5-zeroshot.yaml").exists()
    for name in video + text:  # each is a conf/shift choice that resolves to a registered shift
        shift = compose("run", [f"shift={name}"]).shift
        assert shift.name in video_shift_names() + text_shift_names(), name
    cfg = compose("run", ["experiment=paper-table4-cross-msrvtt-to-activitynet", "scenario=cross", "data=activitynet",
                          "scenario.train_data=msrvtt", "model=xpool", "task=t2v"])
    assert cfg.scenario.train_data == "msrvtt" and cfg.data.name == "activitynet"
    assert cfg.model.arch == "ViT-B-32-quickgelu" and cfg.model.name == "xpool"
    assert compose("run", ["scenario=cross"]).scenario.train_data == "synth_b"


def test_severity_tables_long_layout():
    import pandas as pd

    from tta.reporting.paper import paper_tables, severity_tables

    rows = []
    for seed in (0, 1):
        for sev in (1, 3, 5):
            rows.append({"data": "synth", "task": "v2t", "scenario": "qs", "model": "xpool", "adapter": "source",
                         "adapter_rank": 0, "level": "low", "level_rank": 0, "shift": "gaussian", "severity": sev,
                         "seed": seed, "R@1": 60.0 - 10 * sev + seed})
        rows.append({"data": "synth", "task": "v2t", "scenario": "qs", "model": "xpool", "adapter": "source",
                     "adapter_rank": 0, "level": "mid", "level_rank": 1, "shift": "motion_blur", "severity": 5,
                     "seed": seed, "R@1": 40.0})
    df = pd.DataFrame(rows)
    (table,) = severity_tables(df)
    assert list(table.frame.index) == [("xpool", "source", "low-level", "gaussian")]  # one-severity shifts left out
    assert table.frame.iloc[0].tolist() == [50.5, 30.5, 10.5, 30.5]  # s1 s3 s5 (mean of 2 seeds), then their mean
    md = table.to_markdown()
    assert "| model | adapter | shift level | shift | s1 | s3 | s5 | mean |" in md
    assert "| xpool | source | low-level | gaussian | 50.5 ± 0.7 (2) | 30.5 ± 0.7 (2) | 10.5 ± 0.7 (2) | 30.5 |" in md
    assert r"xpool & source & low-level & gaussian & 50.5 $\pm$ 0.7 (2) & 30.5" in table.to_latex()
    wide = paper_tables(df)[0].frame  # shift-major columns: gaussian s1, s3, s5, then motion_blur
    assert [c[1] for c in wide.columns] == ["gaussian s1", "gaussian s3", "gaussian s5", "motion_blur", "Avg"]


def test_report_names_runs_with_skipped_inputs_or_a_collapse(tmp_path):
    import json as _json


    base = {"data": "synth", "task": "v2t", "scenario": "qs", "model": "xpool", "posthoc": "none", "severity": 0,
            "seed": 42, "train_data": "synth", "num_queries": 98,
            "retrieval": {"R@1": 40.0, "R@5": 70.0, "R@10": 80.0, "R@50": 99.0, "MdR": 2.0, "MnR": 5.0},
            "hubness": {"skewness": 1.0, "k": 10}, "time_s": {"per_query_ms": 1.0}}
    runs = {"a": {"adapter": "source", "shift": "clean", "skipped": {"n": 2, "reasons": {"missing_video": 2}}},
            "b": {"adapter": "tent", "shift": "clean", "collapse": {"collapsed": True, "top1_mode_share": 0.9}},
            "c": {"adapter": "tcr", "shift": "clean", "skipped": {"n": 0}}}
    for name, extra in runs.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(_json.dumps({**base, **extra}))
    build_report(tmp_path, tmp_path / "report")
    text = (tmp_path / "report" / "robustness.md").read_text()
    assert "a: 2 input pair(s) skipped" in text.replace(str(tmp_path) + "/", "") and "over 98 queries" in text
    assert f"{tmp_path / 'b'}: collapsed" in text and f"{tmp_path / 'c'}:" not in text


def test_multi_caption_runs_are_never_averaged_with_one_to_one_runs(tmp_path):
    import json as _json

    from tta.reporting import load_sweep

    base = {"data": "msvd", "task": "t2v", "scenario": "qs", "model": "xpool", "adapter": "source", "posthoc": "none",
            "shift": "clean", "severity": 0, "seed": 42, "train_data": "msvd",
            "hubness": {"skewness": 1.0, "k": 10}, "time_s": {"per_query_ms": 1.0}}
    runs = {"one": {"num_queries": 670, "retrieval": {"R@1": 40.0}},
            "multi": {"num_queries": 27763, "retrieval": {"R@1": 30.0},
                      "evaluation": {"protocol": "multi_caption", "num_videos": 670, "num_captions": 27763}}}
    for name, extra in runs.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(_json.dumps({**base, **extra}))
    df, _ = load_sweep(tmp_path)
    got = dict(zip(df["data"], df["R@1"], strict=True))
    assert got == {"msvd": 40.0, "msvd (multi-caption)": 30.0}
    assert sorted(df["protocol"]) == ["multi_caption", "one_to_one"]


def test_a_stop_signal_in_a_sweep_job_ends_the_sweep_with_75_and_an_error_file(tmp_path, monkeypatch):
    """The interrupt is a BaseException, which Hydra does not hand to the sweep's callbacks: the job's process
    writes its error.txt and ends the sweep (exit code 75); the next job does not start, and a re-run resumes."""
    import signal

    import tta.run
    from tta.utils.signals import RunInterrupted

    started = []

    def interrupted(cfg, run_dir):
        started.append(Path(run_dir).name)
        raise RunInterrupted(signal.SIGTERM)

    monkeypatch.setattr(tta.run, "stream", interrupted)  # the job of the default task (job._target_)
    monkeypatch.setattr("tta.utils.cli.end_process", sys.exit)  # the process end, less its teardown shortcut
    monkeypatch.setattr(sys, "argv", ["tta.run", "-m", "hydra/launcher=basic", f"hydra.sweep.dir={tmp_path}",
                                      "adapter=source,tent"])
    with pytest.raises(SystemExit) as info:
        tta.run.cli()
    assert info.value.code == 75
    assert started == ["adapter=source"]
    error = (tmp_path / "adapter=source" / "error.txt").read_text()
    assert "RunInterrupted: interrupted by SIGTERM before the query stream" in error
    assert not (tmp_path / "adapter=tent").exists()
