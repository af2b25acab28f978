"""The stage clock of time_s.split: nested stages record self time, hooks are charged to their stage."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from tta.adapters.base import OnlineAdapter
from tta.utils import timing
from tta.utils.timing import StageClock, instrument, time_record


def fake_clock(monkeypatch, ticks):
    it = iter(ticks)
    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(it))


def test_nested_stage_records_self_time(monkeypatch):
    fake_clock(monkeypatch, [0.0, 1.0, 4.0, 10.0])  # adapt 0..10 holds a forward 1..4
    clock = StageClock()
    with clock.stage("adapt"):
        with clock.stage("forward"):
            pass
    assert clock.split()["forward"] == pytest.approx(3.0) and clock.split()["adapt"] == pytest.approx(7.0)


def test_sync_runs_around_each_stage():
    calls = []
    clock = StageClock(sync=lambda: calls.append(1))
    with clock.stage("forward"):
        pass
    assert len(calls) == 2


class Kept:
    def add(self, *args):
        return None


class Adapter:
    """The hooks of an adapter, with the base's own loop (OnlineAdapter.adapt_batch) driving them."""

    posthoc = None
    stage_clock = None
    steps, optimizer, predict_with = 1, object(), "pre_update"

    def __init__(self):
        self.kept = Kept()

    def adapt_batch(self, batch, record):
        return OnlineAdapter.adapt_batch(self, batch, record)

    def after_step(self, step):
        return None

    def transfer_batch_to_device(self, batch, device, idx):
        return batch

    def forward_queries(self, batch):
        return SimpleNamespace(sims=torch.zeros(1, 1))

    def update(self, batch, fw, step, record):
        self.forward_queries(batch)  # a second pass's forward counts as forward
        return True

    def refine_scores(self, sims):
        return sims


def test_instrument_charges_hooks_to_their_stage(monkeypatch):
    # the loop's forward 0..1; update 1..10 with its inner forward 2..5; refine 10..11
    fake_clock(monkeypatch, [0.0, 1.0, 1.0, 2.0, 5.0, 10.0, 10.0, 11.0])
    a = Adapter()
    clock = instrument(a, StageClock())
    a.adapt_batch(None, None)
    a.refine_scores(1)
    rec = time_record(clock, total_s=20.0, stream_s=12.0, n_queries=4)
    assert rec["split"]["adapt"] == pytest.approx(6.0) and rec["split"]["forward"] == pytest.approx(4.0)
    assert rec["adapt"] == pytest.approx(7.0)  # adapt + refine: the method's own work
    assert rec["setup"] == pytest.approx(8.0) and rec["per_query_ms"] == pytest.approx(3000.0)
    assert rec["method_ms_per_query"] == pytest.approx(1000.0 * 11.0 / 4)
    assert Adapter.update.__qualname__ == a.update.__qualname__ and "update" not in vars(a)  # not wrapped


def test_source_reports_no_adaptation():
    rec = time_record(StageClock(), total_s=10.0, stream_s=5.0, n_queries=10)
    assert rec["adapt"] == 0.0 and rec["split"]["adapt"] == 0.0 and rec["stream"] == 5.0


def test_cpu_seconds_are_recorded_beside_the_wall_clock():
    rec = time_record(StageClock(), total_s=10.0, stream_s=5.0, n_queries=10, cpu=(6.0, 4.5))
    assert rec["cpu_total"] == 6.0 and rec["cpu_stream"] == 4.5 and rec["cpu_process"] > 0.0
    assert "cpu_total" not in time_record(StageClock(), total_s=1.0, stream_s=0.5, n_queries=1)
