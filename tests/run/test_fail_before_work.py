"""Options that cannot work are refused before any stage runs, in one line printed once, with exit code 2; an
error raised inside a loader worker reaches the user as the worker's own message."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader

from tests.conftest import tiny_overrides
from tta.utils.cli import exit_with_line, user_error_line
from tta.utils.forking import loader_worker_init

ROOT = Path(__file__).resolve().parents[2]
# what any stage logs first: rendering / training the embedded assets, the decoder, the gallery, Lightning
STAGE_LINES = ("first use", "fine-tuning", "video decoder", "checking test videos", "encoding", "GPU available")


@pytest.mark.parametrize(("override", "line"), [
    ("shift=style_transfer", "error: style_transfer (AdaIN) needs shift.options.weights_dir, a directory with "
                             "vgg_normalised.pth and decoder.pth"),
    ("shift=style_transfer shift.options.weights_dir={tmp}", "error: AdaIN weights ['vgg_normalised.pth', "
                                                             "'decoder.pth'] not found in {tmp}."),
    ("task=t2v shift=formal", "error: the shift 'formal' runs a real model and needs shift.options.model_path"),
    ("task=t2v shift=back_translation shift.options.model_path={tmp}",
     "error: back_translation needs shift.options.reverse_model_path"),
    ("task=t2v shift=casual shift.options.model_path={tmp}/nothing",
     "error: shift.options.model_path={tmp}/nothing is neither a directory nor a model in the Hugging Face cache"),
    ("data=msrvtt", "error: data=msrvtt needs data.root (or MSRVTT_ROOT): the dataset's directory holding "
                    "root/MSRVTT_JSFUSION_test.csv"),
    ("data=msvd data.root={tmp}/nothing", "error: data=msvd: data.root={tmp}/nothing is not a directory; set "
                                          "data.root (or MSVD_ROOT)"),
    ("batch_size=0", "error: invalid value batch_size=0: expected an integer >= 1"),
    ("adapter=noregret adapter.method.guard.agreement=1.5",  # a bound its option dataclass declares
     "error: invalid value adapter.method.guard.agreement=1.5: expected a finite number in [0, 1]"),
    ("shift=h264_compression shift.options.threads=0",  # a bound the shift declares where it registers
     "error: invalid value shift.options.threads=0: expected an integer >= 1"),
])
def test_refused_before_any_stage_in_one_line_printed_once(tiny_cache, tmp_path, override, line):
    override, line = override.format(tmp=tmp_path), line.format(tmp=tmp_path)
    out = subprocess.run([sys.executable, "-m", "tta.run", *tiny_overrides(tiny_cache, "print_config=false"),
                          f"hydra.run.dir={tmp_path / 'run'}", *override.split()],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    text = out.stdout + out.stderr
    assert out.returncode == 2, text[-2000:]
    assert text.count(line) == 1 and "Traceback" not in text, text[-2000:]
    assert not any(stage in text for stage in STAGE_LINES), text[-2000:]
    assert line.removeprefix("error: ") in (tmp_path / "run" / "run.log").read_text()  # the log file keeps it too


def test_a_sweep_config_without_dash_m_is_refused_with_the_command(tmp_path):
    out = subprocess.run([sys.executable, "-m", "tta.run", "experiment=v2t-gaussian-severity5", "seed=1"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert out.returncode == 2
    assert out.stderr.splitlines()[0] == ("error: experiment=v2t-gaussian-severity5 is a sweep: run it with -m: "
                                          "python -m tta.run -m experiment=v2t-gaussian-severity5 seed=1")
    assert not (tmp_path / "outputs").exists()


class _Failing(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int):
        raise FileNotFoundError("weights missing in /x:\nput them there")


def test_an_error_in_a_loader_worker_is_its_own_message():
    batches = iter(DataLoader(_Failing(), batch_size=2, num_workers=1, worker_init_fn=loader_worker_init))
    with pytest.raises(FileNotFoundError) as caught:
        next(batches)
    assert "Original Traceback" in str(caught.value)  # torch's wrapping, which the line must not show
    assert user_error_line(caught.value) == "weights missing in /x: put them there"
    # the loader run to its end shuts its worker down now; left half-read, the garbage collector's shutdown of it
    # waits out the worker's 5 s queue timeout and its ignored SIGTERM during whichever test comes next
    with pytest.raises(FileNotFoundError):
        next(batches)
    with pytest.raises(StopIteration):
        next(batches)


def test_the_error_line_goes_once_to_the_terminal_and_once_to_the_log_file(tmp_path, capsys):
    root = logging.getLogger()
    console, file = logging.StreamHandler(sys.stderr), logging.FileHandler(tmp_path / "run.log")
    root.addHandler(console)
    root.addHandler(file)
    try:
        with pytest.raises(SystemExit) as stop:
            exit_with_line("something the user can fix")
    finally:
        root.removeHandler(console)
        root.removeHandler(file)
        file.close()
    assert stop.value.code == 2
    assert capsys.readouterr().err.count("something the user can fix") == 1
    assert (tmp_path / "run.log").read_text().count("something the user can fix") == 1
