"""How the command lines end on bad input: one line saying what was wrong and what to do, and exit code 2.

Two kinds of bad input reach a ``python -m tta.<command>``:

* Hydra's, before any code of ours runs: an option no config group has (``adapter=nosuch``), a key the config
  lacks (``foo=1``), an override Hydra cannot parse (``shift.severity=[1``). Hydra prints several lines and exits
  with 1; :func:`command_line_errors` turns them into one line and 2.
* ours, raised while the command runs: a value out of range, a missing file, a full disk
  (:func:`exit_on_user_error`).

A bug keeps its traceback, and ``HYDRA_FULL_ERROR=1`` shows the traceback of either kind. A command's process
ends through :func:`end_process` (docs/results/first-run-time.md, "A warm run's start-up").
This module imports nothing heavy, so that a typo is reported before torch and Lightning load.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import difflib
import errno
import io
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import NoReturn

log = logging.getLogger("tta.cli")

USER_ERRORS = (ValueError, FileNotFoundError, FileExistsError, FloatingPointError)


def full_error() -> bool:
    """Whether the user asked for tracebacks (Hydra's own switch, as the user set it: :func:`command_line_errors`)."""
    return os.environ.get(_ASKED, os.environ.get("HYDRA_FULL_ERROR")) == "1"


def user_error_line(e: BaseException) -> str | None:
    """One line telling the user what went wrong and what to do, for errors the user can fix; None for bugs."""
    if isinstance(e, ModuleNotFoundError) and e.name:
        return (f"the optional dependency {e.name!r} is not installed ({e}); install it (pip install {e.name}, or "
                f"the tta extra that lists it) or choose an option that does not need it")
    from hydra.errors import InstantiationException

    if isinstance(e, InstantiationException) and e.__cause__ is not None:
        return _instantiation_line(e)
    # a video that cannot be decoded is the user's file; its class is looked up only where video code was loaded
    video = sys.modules.get("tta.media.video")
    if isinstance(e, USER_ERRORS) or (video is not None and isinstance(e, video.VideoDecodeError)):
        from tta.utils.forking import worker_message  # an error of a loader worker: its own message

        return worker_message(e).replace("\n", " ")
    if isinstance(e, OSError) and e.errno is not None:  # the file system, not the code: permissions, space, paths
        where = f" {e.filename}" if e.filename else ""
        what = {errno.ENOSPC: "no space left on device writing{where}: free space or point hydra.run.dir / "
                              "paths.cache_dir at another disk",
                errno.EDQUOT: "disk quota exceeded writing{where}: free space or use another disk",
                errno.EACCES: "permission denied on{where}: choose a writable hydra.run.dir / paths.cache_dir",
                errno.EPERM: "operation not permitted on{where}: choose a writable hydra.run.dir / paths.cache_dir",
                errno.EROFS: "read-only file system at{where}: choose a writable hydra.run.dir / paths.cache_dir",
                errno.ENOTDIR: "a file is in the way of the directory{where}: choose another path"}
        return what.get(e.errno, f"{e.strerror or e} ({where.strip() or 'no file named'})").format(where=where).strip()
    return None


def _instantiation_line(e: BaseException) -> str | None:
    """A ``_target_`` built from the config refused its options: the target's own reason and the config key.
    An unexpected keyword is an option the class does not take (``+adapter.method.lrr=0.1``)."""
    import re

    cause = e.__cause__
    found = re.search(r"full_key: (\S+)", str(e))
    key = found.group(1) if found else "the config"
    if located := re.search(r"Error locating target '([^']+)'", str(e)):
        return f"{key}._target_={located.group(1)} cannot be imported: {_target_hint(located.group(1))}"
    if isinstance(cause, TypeError) and "unexpected keyword argument" in str(cause):
        return f"{key}: {cause}; check the option's spelling (python -m tta.run --cfg job prints the config)"
    line = user_error_line(cause)
    return None if line is None else f"{line} ({key})"


def _target_hint(target: str) -> str:
    """What is wrong with a dotted ``_target_``: the first part that does not import, and the closest name there."""
    import importlib

    parts = target.split(".")
    for n in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:n])
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        name = parts[n]
        if hasattr(module, name):
            return f"{'.'.join(parts[:n + 1])} has no {'.'.join(parts[n + 1:])!r}"
        names = [m for m in dir(module) if not m.startswith("_")]
        close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
        if not close and hasattr(module, "__path__"):  # a package: its modules
            import pkgutil

            close = difflib.get_close_matches(name, [m.name for m in pkgutil.iter_modules(module.__path__)], n=1,
                                              cutoff=0.6)
        mean = f"; did you mean {module_name}.{close[0]}?" if close else ""
        return f"{module_name} has no {name!r}{mean}"
    return f"no module named {parts[0]!r}"


def exit_with_line(line: str, to_log: bool = True) -> NoReturn:
    """Print ``line`` (and write it to the run's log file, where the run has one) and exit with 2. The line is the
    whole answer; ``HYDRA_FULL_ERROR=1`` for the stack trace is documented with the errors (docs/outputs.md)."""
    if to_log:
        from tta.utils.logs import log_to_files  # the console gets the line once, below

        log_to_files(log, logging.ERROR, line)
    print(f"error: {line}", file=sys.stderr)
    sys.exit(2)


def exit_on_user_error(e: BaseException) -> NoReturn:
    """End a command line on ``e``: one line and exit code 2 for what the user can fix; the traceback (``e``
    re-raised) for a bug, or with ``HYDRA_FULL_ERROR=1``. Call it from the ``except`` clause."""
    line = user_error_line(e)
    if line is None or full_error():
        raise e
    exit_with_line(line)


def hydra_error_line(e: BaseException) -> str | None:
    """One line for Hydra's errors about the command line and the config files; None for any other error."""
    from hydra.errors import (
        ConfigCompositionException,
        MissingConfigException,
        OverrideParseException,
        SearchPathException,
    )

    if isinstance(e, MissingConfigException) and e.options is not None:
        group, _, wrong = (e.missing_cfg_file or "").rpartition("/")
        first = str(e).splitlines()[0]
        close = difflib.get_close_matches(wrong, e.options, n=1, cutoff=0.6)
        mean = f"did you mean {group}={close[0]}? " if close else ""
        return f"{first}; {mean}the options in '{group}' are: {', '.join(e.options)}"
    if isinstance(e, OverrideParseException):
        grammar = "https://hydra.cc/docs/advanced/override_grammar/basic/"
        return f"cannot parse the override {e.override!r}: {str(e).splitlines()[0]} (the grammar: {grammar})"
    if isinstance(e, ConfigCompositionException) and (line := _missing_key_line(e)) is not None:
        return line
    if isinstance(e, ValueError) and _raised_in(e, "hydra._internal.utils", "_run_hydra"):
        return _flags_line(str(e).splitlines()[0])  # the flags Hydra reads before composing (-m with --cfg)
    if isinstance(e, ConfigCompositionException | SearchPathException):
        parts = [line.strip() for line in str(e).splitlines() if line.strip()]
        if e.__cause__ is not None:  # OmegaConf's reason, without its full_key/object_type detail lines
            parts.append(str(e.__cause__).splitlines()[0].strip())
        return " ".join(p if p.endswith((".", ":")) else p + "." for p in parts)
    return None


def _flags_line(message: str) -> str:
    if "--multirun" in message:  # -m with --cfg: the wish is most often to see the config a sweep's job gets
        return f"{message}: give one; to see a sweep job's config, drop -m and keep --cfg job with the job's overrides"
    return f"{message} (--hydra-help lists the flags)"


def _raised_in(e: BaseException, module: str, function: str) -> bool:
    """Whether ``e`` was raised by ``function`` of ``module`` itself (its traceback's innermost frame)."""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_name == function and tb.tb_frame.f_globals.get("__name__") == module


def _missing_key_line(e: BaseException) -> str | None:
    """``adapter.lrr=0.1``: the node's real keys and the closest one. Hydra's own hint (``+adapter.lrr=0.1``) adds
    a key nothing reads, so it comes last."""
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError

    cause = e.__cause__
    node = getattr(cause, "parent_node", None)
    if not isinstance(cause, ConfigAttributeError | ConfigKeyError) or node is None or cause.key is None:
        return None
    key, parent = str(cause.key), str(cause.full_key).rpartition(".")[0]
    keys = [str(k) for k in node.keys() if not str(k).startswith("_") and k != "hydra"]
    prefix = parent + "." if parent else ""
    close = [prefix + k for k in difflib.get_close_matches(key, keys, n=1, cutoff=0.7)]
    close += [f"{prefix}{k}.{key}" for k in keys if key in _keys_of(node, k)]  # adapter.lr -> adapter.method.lr
    mean = f"did you mean {' or '.join(close)}? " if close else ""
    plus = next((w.rstrip(".") for w in str(e).split() if w.startswith("+")), None)
    add = f" ({plus} adds a new key, which only code of your own reads)" if plus else ""
    return f"{f'{parent!r}' if parent else 'the config'} has no key {key!r}; {mean}its keys are: {', '.join(keys)}{add}"


def _keys_of(node, key: str) -> set[str]:
    """The keys of ``node[key]`` where it is a mapping (empty otherwise, or where it does not resolve)."""
    from omegaconf import DictConfig

    try:
        child = node._get_node(key)
    except Exception:  # noqa: BLE001 - a hint, never a second error
        return set()
    return {str(k) for k in child.keys()} if isinstance(child, DictConfig) else set()


#: called with the exception that ends a command line before it exits (a sweep prints its summary there)
ON_FAILURE: list[Callable[[BaseException], None]] = []
_ASKED = "TTA_FULL_ERROR_ASKED"  # the user's HYDRA_FULL_ERROR, kept while the command sets its own


@contextlib.contextmanager
def command_line_errors() -> Iterator[None]:
    """Run a ``@hydra.main`` function inside: Hydra's errors about the command line become one line and exit code 2.

    Hydra's own switch ``HYDRA_FULL_ERROR=1`` makes it raise errors instead of printing them as several lines, so
    the command sets it for its duration and answers them here; the user's own setting still shows tracebacks."""
    saved = {k: os.environ.get(k) for k in ("HYDRA_FULL_ERROR", _ASKED)}
    asked = full_error()
    os.environ[_ASKED], os.environ["HYDRA_FULL_ERROR"] = ("1" if asked else "0"), "1"
    try:
        yield
    except Exception as e:
        for hook in ON_FAILURE:
            hook(e)
        line = None if asked else hydra_error_line(e)
        if line is None:
            raise
        exit_with_line(line, to_log=False)  # before any run's log
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        ON_FAILURE.clear()


def hydra_cli(main: Callable[[], object]) -> None:
    """Call a ``@hydra.main`` function as a command line (:func:`command_line_errors`)."""
    flags = _check_flags(sys.argv[1:])
    with command_line_errors(), _shown_package(flags.cfg, flags.package):
        main()


@contextlib.contextmanager
def _shown_package(cfg: str | None, package: str | None) -> Iterator[None]:
    """``--cfg job --package a.b`` of a node the config lacks: Hydra writes its own line (without what to do) and
    exits with 1; here that is one line with the fix and exit code 2. Only that exit is answered: anything else
    Hydra wrote meanwhile goes to stderr as it was."""
    if not (cfg and package):
        yield
        return
    written, answered = io.StringIO(), False
    try:
        with contextlib.redirect_stderr(written):
            yield
    except SystemExit as e:
        answered = e.code == 1 and _raised_in(e, "hydra._internal.hydra", "show_cfg")
        if not answered:
            raise
    finally:
        if not answered:  # answered: what it wrote is Hydra's own line, replaced below
            sys.stderr.write(written.getvalue())
    if answered:
        exit_with_line(f"--package {package}: the {cfg} config has no node '{package}'; give a node's dotted path "
                       f"(--package adapter, --package adapter.method) or drop --package for the whole config",
                       to_log=False)


def _check_flags(argv: list[str]) -> argparse.Namespace:
    """Parse Hydra's own flags first with Hydra's parser, so that a bad one (``--cfg bad``, ``--nosuch``) is one
    line and exit code 2 instead of argparse's usage block; what parses here parses the same in ``@hydra.main``."""
    from hydra._internal.utils import get_args_parser

    def error(message: str) -> NoReturn:
        if message.startswith("unrecognized arguments:") and "=" in message:  # adapter=tent -m seed=1,2
            exit_with_line(f"{message}: give the flags (-m, --cfg, ...) before or after all the overrides, not "
                           "between them", to_log=False)
        exit_with_line(_flags_line(message), to_log=False)

    parser = get_args_parser()
    parser.error = error
    return parser.parse_args(argv)


def run_command(main: Callable[[], object]) -> NoReturn:
    """A command line's whole process: :func:`hydra_cli`, then :func:`end_process` with its exit code."""
    try:
        hydra_cli(main)
    except SystemExit as e:
        end_process(e.code)
    end_process(0)


def end_process(code: int | str | None) -> NoReturn:
    """Exit as ``sys.exit(code)`` does, without the interpreter's teardown of every module and object (seconds once
    torch, Lightning and open_clip are loaded: docs/results/first-run-time.md). What a normal exit does first still
    runs: the other non-daemon threads are waited for, the ``atexit`` handlers (logging's flush, loggers, loader
    workers) run and the standard streams are flushed. Under a profiler or tracer, which write their output at teardown, or with a
    message instead of a code, the exit is the ordinary one."""
    if not (code is None or isinstance(code, int)) or sys.getprofile() is not None or sys.gettrace() is not None:
        sys.exit(code)
    threading._shutdown()  # as the interpreter does first: the thread pools' exit hooks, then every non-daemon thread
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing left to save
            pass
    os._exit(code or 0)
