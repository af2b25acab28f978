"""data=features and python -m tta.export (tta/data/features.py): the file round trip, what is refused, and that a
features run reproduces the retrieval and hubness blocks of the run on the dataset."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from tests.conftest import tiny_overrides
from tests.fixtures import build_fast_env
from tta.adapters.base import OnlineAdapter
from tta.data.features import FeatureSet, check_feature_adapter, feature_model, read_features, write_features
from tta.data.layout import EvalLayout
from tta.data.readers.msrvtt import VideoTextPair
from tta.data.screen import InputReport
from tta.utils.config import compose, import_target


def _feature_set(head: str = "xpool", task: str = "v2t") -> tuple[FeatureSet, object]:
    env = build_fast_env(head, task, batch_sizes=(4, 2), n=6)
    queries = torch.stack([torch.cat([env.model.encode_video(b["video"]) if task == "v2t" else
                                      env.model.encode_text(b["tokens"]) for b in env.batches]).detach()])
    pairs = [VideoTextPair(f"v{i}", c, f"c{i}", None) for i, c in enumerate(env.captions)]
    layout = EvalLayout.build(pairs, task)
    meta = {"config": {"task": task}, "head": head, "num_read": 6}
    report = InputReport(skipped=[{"index": 9, "video_id": "v9", "caption_id": "c9", "reason": "missing", "detail": ""}])
    return FeatureSet(queries, env.gallery, dict(env.model.pool.state_dict()), layout, report, meta), env


@pytest.mark.parametrize("name", ["features.pt", "npy_dir"])
def test_round_trip_keeps_features_layout_report_and_head(tmp_path, name):
    features, env = _feature_set()
    back = read_features(write_features(tmp_path / name, features))
    assert torch.equal(back.queries, features.queries) and torch.equal(back.gallery, features.gallery)
    assert back.layout.queries == features.layout.queries and torch.equal(back.layout.gt, features.layout.gt)
    assert back.report.skipped_record() == features.report.skipped_record()
    model = feature_model(back)
    with torch.no_grad():
        assert torch.allclose(model.similarity(back.queries[0], back.gallery),
                              env.model.similarity(features.queries[0], env.gallery), atol=1e-6)


def test_bad_feature_files_are_one_line_errors(tmp_path):
    features, _ = _feature_set("meanp", "v2t")
    (tmp_path / "junk.pt").write_bytes(b"not a torch file")
    torch.save({"meta": {"format": "something-else"}}, tmp_path / "foreign.pt")
    features.gallery = features.gallery[:4]  # fewer gallery rows than the layout
    write_features(tmp_path / "short.pt", features)
    (tmp_path / "no_meta").mkdir()
    cases = {"absent.pt": (FileNotFoundError, "does not exist"), "junk.pt": (ValueError, "not a readable features"),
             "foreign.pt": (ValueError, "not a tta features file"), "short.pt": (ValueError, "do not match its layout"),
             "no_meta": (ValueError, "features.json is missing")}
    for name, (kind, text) in cases.items():
        with pytest.raises(kind, match=text) as info:
            read_features(tmp_path / name)
        assert "\n" not in str(info.value) and "tta.export" in str(info.value)


@pytest.mark.parametrize("adapter", ["source", "hsm", "qbnorm", "dsl", "tent", "hatvtr", "tcr", "sar", "eata",
                                     "read", "noregret"])
def test_only_gradient_free_adapters_run_on_features(adapter):
    cfg = compose("run", [f"adapter={adapter}"])
    cls = import_target(cfg.adapter.method._target_)
    assert issubclass(cls, OnlineAdapter)
    if adapter in ("source", "hsm", "qbnorm", "dsl"):
        check_feature_adapter(cfg.adapter)
    else:
        with pytest.raises(ValueError, match=f"adapter={adapter} needs the model's encoders"):
            check_feature_adapter(cfg.adapter)


def _blocks(res: dict) -> dict:
    return {k: res[k] for k in ("retrieval", "hubness", "task", "model", "shift", "severity", "data", "num_queries",
                                "num_gallery", "evaluation", "skipped", "source_weights")}


@pytest.mark.parametrize(("setting", "container"), [(("model=clip4clip", "task=v2t", "shift=gaussian"), "f.pt"),
                                                    (("model=xpool", "task=t2v", "shift=char_swap"), "npy")])
def test_features_reproduce_the_dataset_run(tiny_cache, tmp_path, single_thread_torch, setting, container):
    from tta.export import export
    from tta.run import run

    path = export(compose("export", tiny_overrides(tiny_cache, *setting)), tmp_path / container)
    for adapter in ("source", "hsm"):
        direct = run(compose("run", tiny_overrides(tiny_cache, *setting, f"adapter={adapter}")), tmp_path / adapter)
        feats = run(compose("run", [f"data.path={path}", "data=features", f"adapter={adapter}",
                                    f"paths.cache_dir={tiny_cache}"]), tmp_path / f"{adapter}-features")
        assert _blocks(feats) == _blocks(direct)
        assert len(direct["source_weights"]) == 16  # the exported source model's digest, carried by the features
        assert feats["config"]["data"]["features"] == str(path)


def test_cli_refuses_bad_or_missing_feature_files_with_exit_code_2(tmp_path):
    (tmp_path / "junk.pt").write_bytes(b"junk")
    for extra in ([f"data.path={tmp_path / 'junk.pt'}"], [f"data.path={tmp_path / 'absent.pt'}"], []):
        res = subprocess.run([sys.executable, "-m", "tta.run", "data=features", *extra, f"hydra.run.dir={tmp_path}/r",
                              "print_config=false"], capture_output=True, text=True, timeout=300)
        assert res.returncode == 2, res.stderr[-2000:]
        assert "Traceback" not in res.stderr and "error: data" in res.stderr, res.stderr[-2000:]
