"""Hydra's errors about the command line, as one line and exit code 2 (tta/utils/cli.py), in-process."""

from __future__ import annotations

import sys

import hydra
import pytest
from omegaconf import DictConfig

from tta.utils.cli import hydra_cli, hydra_error_line
from tta.utils.config import CONF_DIR, compose


def _error_of(overrides: list[str]) -> Exception:
    with pytest.raises(Exception) as info:
        compose("run", overrides)
    return info.value


@pytest.mark.parametrize(("overrides", "line"), [
    (["adapter=hatvrt"], "In 'run': Could not find 'adapter/hatvrt'; did you mean adapter=hatvtr? the options in "
                         "'adapter' are: dsl, eata, hatvtr, hatvtr_gate, hatvtr_hubloss, hsm, noregret, qbnorm, read, "
                         "sar, source, tcr, tent"),
    (["hydra/launcher=slrum"], "In 'hydra/config': Could not find 'hydra/launcher/slrum'; did you mean "
                               "hydra/launcher=slurm? the options in 'hydra/launcher' are: basic, local, slurm, "
                               "submitit_local, submitit_slurm"),
    (["adapter=xyz"], "In 'run': Could not find 'adapter/xyz'; the options in 'adapter' are: dsl, eata, hatvtr, "
                      "hatvtr_gate, hatvtr_hubloss, hsm, noregret, qbnorm, read, sar, source, tcr, tent"),
    (["adapter=tent", "adapter.lr=0.1"], "'adapter' has no key 'lr'; did you mean adapter.method.lr? its keys are: "
                                         "method, name (+adapter.lr=0.1 adds a new key, which only code of your own "
                                         "reads)"),
    (["adapter=tent", "adapter.method.lrr=0.1"], "'adapter.method' has no key 'lrr'; did you mean adapter.method.lr? "
                                                 "its keys are: reset_policy, steps, lr, weight_decay, betas, "
                                                 "predict_with, temperature, preset, legacy_shared_forward "
                                                 "(+adapter.method.lrr=0.1 adds a new key, which only code of your own "
                                                 "reads)"),
    (["hubness.kk=3"], "'hubness' has no key 'kk'; its keys are: k (+hubness.kk=3 adds a new key, which only code of "
                       "your own reads)"),
    (["+adapter=tent"], "Multiple values for adapter. To override a value use 'override adapter: tent'."),
    (["shift.severity=[1"], "cannot parse the override 'shift.severity=[1': no viable alternative at input '[1' "
                            "(the grammar: https://hydra.cc/docs/advanced/override_grammar/basic/)"),
    (["~nokey"], "Could not delete from config. 'nokey' does not exist."),
])
def test_each_hydra_error_is_one_line(overrides, line):
    assert hydra_error_line(_error_of(overrides)) == line


def test_optional_groups_refuse_a_misspelt_choice():
    """experiment= and debug= have no default; a misspelt one is an error, not a silent run of the defaults."""
    for group in ("experiment", "debug"):
        line = hydra_error_line(_error_of([f"{group}=nosuch"]))
        assert line.startswith(f"In 'run': Could not find '{group}/nosuch'; "), line
        assert f"the options in '{group}' are: " in line, line
    assert compose("run", ["experiment=seeds", "debug=tiny"]).data.synth.n_test == 40  # a right one still applies


def test_a_target_that_refuses_its_options_is_one_line_with_its_key():
    """An option typo below a ``_target_`` (``+adapter.method.lrr=0.1``) surfaces when the run instantiates it."""
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from tta.utils.cli import user_error_line

    cfg = OmegaConf.create({"shift": {"options": {"_target_": "builtins.int", "_args_": ["five"]}}})
    with pytest.raises(InstantiationException) as refused:  # the target's ValueError: the user's value
        instantiate(cfg.shift.options)
    assert user_error_line(refused.value) == "invalid literal for int() with base 10: 'five' (shift.options)"
    cfg = OmegaConf.create({"adapter": {"method": {"_target_": "tta.adapters.tent.TentAdapter", "lrr": 0.1}}})
    with pytest.raises(InstantiationException) as typo:
        instantiate(cfg.adapter.method)
    line = user_error_line(typo.value)
    assert line.startswith("adapter.method: ") and "unexpected keyword argument 'lrr'" in line, line
    cfg = OmegaConf.create({"x": {"_target_": "builtins.int", "_args_": [[1]]}})  # a bug in the target: traceback
    with pytest.raises(InstantiationException) as bug:
        instantiate(cfg.x)
    assert user_error_line(bug.value) is None


def test_other_errors_are_not_hydras():
    assert hydra_error_line(ValueError("a value")) is None
    assert hydra_error_line(KeyError("a bug")) is None


@hydra.main(config_path=str(CONF_DIR), config_name="run", version_base="1.3")
def _print_seed(cfg: DictConfig) -> None:
    print(f"seed {cfg.seed}")


def test_the_wrapped_command_line_exits_with_2_and_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)  # Hydra's output directory
    monkeypatch.setattr(sys, "argv", ["tta.run", "adapter=hatvrt"])
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    with pytest.raises(SystemExit) as info:
        hydra_cli(_print_seed)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[0].startswith("error: In 'run': Could not find 'adapter/hatvrt'; did you mean "), err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err

    import os

    assert "HYDRA_FULL_ERROR" not in os.environ  # the command's own setting is gone with it
    monkeypatch.setattr(sys, "argv", ["tta.run", "seed=7", f"hydra.run.dir={tmp_path}/run"])
    hydra_cli(_print_seed)
    assert "seed 7" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "start"), [
    (["-m", "adapter=tent", "--cfg", "job"], "error: Only one of --run, --multirun, --cfg, --info and "
                                             "--shell_completion can be specified: give one; to see a sweep job's"),
    (["--resolve"], "error: The --resolve flag can only be used in conjunction with --cfg or --help (--hydra-help lists"),
    (["--cfg", "bad"], "error: argument --cfg/-c: invalid choice: 'bad' (choose from 'job', 'hydra', 'all') (--hydra-help"),
    (["seed=3", "--nosuch"], "error: unrecognized arguments: --nosuch (--hydra-help lists the flags)"),
    (["adapter=tent", "-m", "seed=1,2"], "error: unrecognized arguments: seed=1,2: give the flags (-m, --cfg, ...) "
                                         "before or after all the overrides, not between them"),
    (["--cfg", "job", "-p", "nosuch.key"], "error: --package nosuch.key: the job config has no node 'nosuch.key'; "
                                           "give a node's dotted path"),
])
def test_clashing_or_unknown_flags_are_one_line(monkeypatch, capsys, tmp_path, argv, start):
    """Hydra checks its flags before composing (a bare ValueError, or argparse's usage block for a flag it does not
    know); the command answers each in one line."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["tta.run", *argv])
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    with pytest.raises(SystemExit) as info:
        hydra_cli(_print_seed)
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.startswith(start) and "Traceback" not in err, err
    assert len(err.splitlines()) == 1, err


def test_a_package_the_config_has_is_shown_as_hydra_shows_it(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["tta.run", "--cfg", "job", "--package", "adapter.method", "adapter=tent"])
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    hydra_cli(_print_seed)
    out = capsys.readouterr()
    assert out.out.startswith("# @package adapter.method\n") and "TentAdapter" in out.out and out.err == ""


def test_a_value_error_of_the_command_itself_is_not_taken_for_a_flag_clash():
    def mine():
        raise ValueError("Only one of --run, --multirun")  # same words, raised elsewhere: a bug, shown in full

    with pytest.raises(ValueError) as info:
        mine()
    assert hydra_error_line(info.value) is None


END = """
import atexit, pathlib, sys, threading, time
from tta.utils.cli import end_process
out = pathlib.Path(sys.argv[1])
atexit.register(lambda: (out / "atexit").write_text("ran"))
threading.Thread(target=lambda: (time.sleep(0.2), (out / "thread").write_text("done"))).start()
from concurrent.futures import ThreadPoolExecutor
pool = ThreadPoolExecutor(1)  # an idle worker, never shut down: the interpreter's exit stops it, so must this
pool.submit(lambda: None).result()
sys.stdout.write("buffered, without a newline")
end_process(3)
"""


def test_the_process_end_keeps_what_a_normal_exit_does(tmp_path):
    """end_process skips the interpreter's teardown only: its code, the exit handlers, a running non-daemon thread
    and buffered output are kept, and an idle thread pool does not keep the process alive."""
    import subprocess

    proc = subprocess.run([sys.executable, "-c", END, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout) == (3, "buffered, without a newline"), proc.stderr
    assert (tmp_path / "atexit").read_text() == "ran" and (tmp_path / "thread").read_text() == "done"


def test_under_a_tracer_or_with_a_message_the_exit_is_the_ordinary_one(monkeypatch):
    from tta.utils.cli import end_process

    with pytest.raises(SystemExit) as info:
        end_process("error: a message")
    assert info.value.code == "error: a message"
    monkeypatch.setattr(sys, "gettrace", lambda: (lambda *args: None))  # a debugger or coverage
    with pytest.raises(SystemExit) as info:
        end_process(5)
    assert info.value.code == 5


def test_a_command_ends_its_process_with_its_exit_code(monkeypatch, tmp_path):
    import tta.utils.cli as cli

    ended = []
    monkeypatch.setattr(cli, "end_process", lambda code: (ended.append(code), sys.exit(0))[1])
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    for argv in (["tta.run", "adapter=hatvrt"], ["tta.run", "seed=7", f"hydra.run.dir={tmp_path}/run"]):
        monkeypatch.setattr(sys, "argv", argv)
        with pytest.raises(SystemExit):
            cli.run_command(_print_seed)
    assert ended == [2, 0]


def test_hydra_full_error_keeps_the_exception(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["tta.run", "adapter=hatvrt"])
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    from hydra.errors import MissingConfigException

    with pytest.raises(MissingConfigException):
        hydra_cli(_print_seed)


def test_the_run_command_line_loads_torch_only_when_a_run_starts():
    """What answers a bad command line (Hydra's composition, the bounds of the keys no class owns) runs before torch
    and Lightning load, so a typo is reported in about a second; tta/run.py imports them inside the run's stages."""
    import subprocess

    code = ("import sys, tta.run, tta.utils.cli, tta.utils.config_rules; from omegaconf import OmegaConf; "
            "print(sorted(m for m in ('torch', 'lightning', 'numpy', 'open_clip') if m in sys.modules), "
            "OmegaConf.has_resolver('tta_dirname'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    # importing the module registers no resolvers either: the entry point does (tta.stages.register_resolvers)
    assert out.returncode == 0 and out.stdout.strip() == "[] False", out.stdout + out.stderr


def test_a_misspelt_target_is_one_line_with_the_closest_name():
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from tta.utils.cli import user_error_line

    cases = {"tta.adapters.tent.TentAdaptr": "tta.adapters.tent has no 'TentAdaptr'; did you mean "
                                            "tta.adapters.tent.TentAdapter?",
             "tta.adapters.tnet.TentAdapter": "tta.adapters has no 'tnet'; did you mean tta.adapters.tent?",
             "nosuch.Thing": "no module named 'nosuch'"}
    for target, reason in cases.items():
        cfg = OmegaConf.create({"adapter": {"method": {"_target_": target}}})
        with pytest.raises(InstantiationException) as info:
            instantiate(cfg.adapter.method)
        assert user_error_line(info.value) == f"adapter.method._target_={target} cannot be imported: {reason}"


def test_help_lists_the_choices_but_not_the_shared_blocks():
    from tta.stages import config_groups

    groups = dict(line.split(": ", 1) for line in config_groups().splitlines())
    assert "adapter" in groups and "tent" in groups["adapter"].split(", ")
    assert not any(g.startswith("hydra") or "_shared" in g for g in groups), groups
