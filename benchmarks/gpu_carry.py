"""The wheels a lent GPU machine lacks, cut into pieces and planned into device calls that each fit beside the working
tree (docs/testing.md, "On a lent GPU: the session kit").

    python benchmarks/gpu_carry.py WHEEL... [--out .whl-big]    # called by benchmarks/gpu_wheels.sh

A device call carries the working tree (tracked files and untracked ones git does not ignore) and the paths it
names, at most 64 MiB together. The pieces are cut to what is left of that beside today's tree (less a MiB to
spare), packed into as few calls as first-fit decreasing finds, and written to ``--out`` with the wheels' SHA-256
sums (``SHA256SUMS``, carried by the first call), which benchmarks/gpu_session.sh checks after joining them there.
A measurement aid, not a test.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MIB = 1024 * 1024
#: what one device call may carry, the working tree included (/work/.library/device/README.md, Limits)
CALL_LIMIT = 64 * MIB
#: kept free in every call: the tree may grow a little between planning and the session
SPARE = MIB
#: paths one device call may carry (the tool's ``carry`` takes at most 8)
CALL_PATHS = 8
SUMS = "SHA256SUMS"


def tree_bytes(repo: Path = REPO) -> int:
    """Bytes of what every device call sends: tracked files and untracked files git does not ignore."""
    listed = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, check=True).stdout.split(b"\0")
    paths = {repo / name.decode() for name in listed if name}
    return sum(path.stat().st_size for path in paths if path.is_file())


def piece_names(wheel: str, count: int) -> list[str]:
    """``wheel.part-aa``, ``-ab``, ...: the names ``split -a 2`` gives, which a shell glob lists in joining order."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    if count > len(letters) ** 2:
        raise ValueError(f"{wheel} would need {count} pieces; at most {len(letters) ** 2}")
    return [f"{wheel}.part-{letters[i // 26]}{letters[i % 26]}" for i in range(count)]


def cut(wheel: Path, piece: int, out: Path) -> list[Path]:
    """Write ``wheel`` to ``out`` as pieces of at most ``piece`` bytes; their paths, in joining order."""
    blob = wheel.read_bytes()
    names = piece_names(wheel.name, max(1, -(-len(blob) // piece)))
    paths = []
    for i, name in enumerate(names):
        (out / name).write_bytes(blob[i * piece:(i + 1) * piece])
        paths.append(out / name)
    return paths


def plan_calls(sizes: dict[str, int], budget: int, paths: int = CALL_PATHS) -> list[list[str]]:
    """Names packed into calls of at most ``budget`` bytes and ``paths`` names each (first-fit decreasing; ties keep
    the given order)."""
    calls: list[tuple[int, list[str]]] = []
    for name, size in sorted(sizes.items(), key=lambda item: -item[1]):
        if size > budget:
            raise ValueError(f"{name} ({size} bytes) is larger than what a call can carry beside the tree "
                             f"({budget} bytes)")
        slot = next((i for i, (used, names) in enumerate(calls) if used + size <= budget and len(names) < paths),
                    None)
        if slot is None:
            calls.append((size, [name]))
        else:
            calls[slot] = (calls[slot][0] + size, [*calls[slot][1], name])
    return [names for _, names in calls]


def prepare(wheels: list[Path], out: Path, tree: int, limit: int = CALL_LIMIT) -> list[list[str]]:
    """Cut ``wheels`` into ``out`` with their sums; the calls, each a list of paths relative to the repository (the
    sums in the first)."""
    budget = limit - tree - SPARE
    if budget < MIB:
        raise ValueError(f"the working tree ({tree / MIB:.1f} MiB) leaves under a MiB of a call's {limit / MIB:.0f} MiB "
                         "for the wheels: commit or ignore less")
    out.mkdir(parents=True, exist_ok=True)
    sums = "".join(f"{hashlib.sha256(w.read_bytes()).hexdigest()}  {w.name}\n" for w in wheels)
    (out / SUMS).write_text(sums)
    sizes = {SUMS: len(sums.encode())}
    piece = budget - sizes[SUMS]
    for wheel in wheels:
        sizes.update({p.name: p.stat().st_size for p in cut(wheel, piece, out)})
    return plan_calls(sizes, budget)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("wheels", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=Path(".whl-big"))
    args = parser.parse_args(argv)
    missing = [str(w) for w in args.wheels if not w.is_file()]
    if missing:
        print(f"error: no such wheel: {', '.join(missing)}", file=sys.stderr)
        return 2
    tree = tree_bytes()
    try:
        calls = prepare(args.wheels, args.out, tree)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    total = sum(w.stat().st_size for w in args.wheels)
    print(f"working tree {tree / MIB:.1f} MiB; wheels {total / MIB:.1f} MiB in {len(calls)} calls of at most "
          f"{(CALL_LIMIT - tree - SPARE) / MIB:.1f} MiB each")
    out = args.out.resolve().relative_to(REPO) if args.out.resolve().is_relative_to(REPO) else args.out
    stage = f"{commit_prefix()}bash benchmarks/gpu_session.sh"
    for i, names in enumerate(calls, 1):
        carry = ", ".join(f'"{out / name}"' for name in names)
        then = f" && {stage} <stage>" if i == len(calls) else ""
        print(f"call {i}: carry [{carry}], command: bash benchmarks/gpu_session.sh keep{then}")
    print(f"then each further stage, carrying nothing: {stage} <tests | stream [args] | startup>")
    return 0


def commit_prefix() -> str:
    """``TTA_COMMIT=<commit> ``: the machine gets the files without their history, so the stages' results and rows
    name the commit through it (tta.results.environment.git_revision); a note where the tree differs from it."""
    from tta.results.environment import git_revision

    rev = git_revision(REPO)
    if rev is None:
        return ""
    if rev["dirty"]:
        print("note: tracked files differ from HEAD: commit them first, or the stages' rows name a commit whose code "
              "did not run")
    return f"TTA_COMMIT={rev['commit'][:7]} "


if __name__ == "__main__":
    sys.exit(main())
