"""The typed run record (tta/results/record.py): fields that do not apply are absent from results.json, not null."""

from __future__ import annotations

import dataclasses

from tta.results import RunResults


def _record(**fields) -> RunResults:
    required = {f.name: None for f in dataclasses.fields(RunResults) if f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING}
    return RunResults(**{**required, **fields})


def test_optional_fields_are_written_only_when_set():
    plain = _record().to_dict()
    assert "shift_options" not in plain and "comp" not in plain and "segments" not in plain
    assert plain["source_weights"] is None and plain["failed_rows"] == 0  # always written
    shifted = _record(shift_options={"sigma": 0.1}, comp={"data": "synth_comp"}).to_dict()
    assert shifted["shift_options"] == {"sigma": 0.1} and shifted["comp"] == {"data": "synth_comp"}
    assert list(shifted).index("shift_options") < list(shifted).index("failed_rows") < list(shifted).index("provenance")
