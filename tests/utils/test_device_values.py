"""Device values read back together (tta/utils/device_values.py) and a batch's terms for the loggers
(tta/callbacks.py::batch_terms)."""

from __future__ import annotations

import math

import pytest
import torch

from tta.callbacks import batch_terms
from tta.utils.device_values import ratio, read_back


def test_every_one_element_tensor_becomes_its_number_in_place():
    history = {"losses": [torch.tensor(0.5), 0.25], "r1": torch.tensor([12.5]),
               "steps": [{"L_na": torch.tensor(1.5, dtype=torch.float64), "n": torch.tensor(3)}],
               "rows": torch.ones(2, 2)}
    counters = {"selected": torch.tensor(7), "share": ratio(torch.tensor(1), 3), "plain": 4}
    read_back(history, counters)
    assert history["losses"] == [0.5, 0.25] and history["r1"] == 12.5
    assert history["steps"][0] == {"L_na": 1.5, "n": 3} and isinstance(history["steps"][0]["n"], int)
    assert torch.is_tensor(history["rows"])  # not a number: left alone
    assert counters == {"selected": 7, "share": 1 / 3, "plain": 4}  # float64, as 1 / 3 in Python


def test_a_loggers_batch_terms_read_device_values():
    extras = {"steps": [{"step": 0, "L_na": torch.tensor(0.5)}, {"step": 1, "L_na": torch.tensor(0.25)}],
              "rm_accuracy": torch.tensor(0.75), "eata/entropy": [torch.tensor(2.0)], "nan": float("nan")}
    terms = batch_terms(extras)
    assert terms["adapt/L_na"] == 0.25 and terms["adapt/rm_accuracy"] == 0.75 and terms["adapt/eata/entropy"] == 2.0
    assert math.isnan(terms["adapt/nan"])


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("where", ["none", "value", "grad", "grad_of_other_dtype"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_finds_any_nan_or_infinity_and_leaves_the_gradients_as_they_were(where, bad, fused, monkeypatch):
    """The fused check and the plain one (a device outside FUSED_CHECK_DEVICES) give the same answers."""
    from tta.utils import device_values
    from tta.utils.device_values import non_finite

    if not fused:
        monkeypatch.setattr(device_values, "FUSED_CHECK_DEVICES", ())

    gen = torch.Generator().manual_seed(0)
    value = torch.tensor(0.25)
    grads = [torch.randn(7, generator=gen), torch.randn(3, 2, generator=gen), torch.randn(5, generator=gen).double(),
             torch.tensor([-0.0, 1e-45, 3.4e38])]  # a negative zero, a subnormal, a large finite value
    if where == "value":
        value = torch.tensor(bad)
    elif where == "grad":
        grads[1][2, 1] = bad
    elif where == "grad_of_other_dtype":
        grads[2][4] = bad
    before = [g.clone() for g in grads]
    found = non_finite(value, grads)
    assert found.dtype == torch.bool and found.shape == () and bool(found) is (where != "none")
    for g, b in zip(grads, before, strict=True):  # bit for bit (the check scales by 1), NaN as NaN
        bits = torch.int32 if g.dtype == torch.float32 else torch.int64
        assert torch.equal(g.isnan(), b.isnan())
        assert torch.equal(g.view(bits)[~g.isnan()], b.view(bits)[~b.isnan()])
