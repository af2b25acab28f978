"""The wheels a lent GPU machine lacks, bundled, cut into pieces and planned into device calls that each fit beside the
working tree (docs/testing.md, "On a lent GPU: the session kit").

    python benchmarks/gpu_carry.py [--out .whl-big] [--optional WHEEL]... WHEEL...   # called by gpu_wheels.sh

A device call carries the working tree (tracked files and untracked ones git does not ignore) and at most eight
paths it names, 64 MiB together. The wheels go into two tar bundles: ``required.tar`` (what every stage needs) and
``optional.tar`` (``--optional``: what only some checks need), each cut into as few equal pieces as fit what a call
carries beside today's tree (less a MiB to spare). The required pieces come first in the plan, so that stages can
run before the optional ones are carried (or without them); the bundles' SHA-256 sums (``SHA256SUMS``) travel with
the first call, and benchmarks/gpu_session.sh checks them after joining the pieces there. A measurement aid, not a
test.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tarfile
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
#: the bundles, in the order their calls come; benchmarks/gpu_session.sh knows the names
REQUIRED, OPTIONAL = "required.tar", "optional.tar"


def tree_bytes(repo: Path = REPO) -> int:
    """Bytes of what every device call sends: tracked files and untracked files git does not ignore."""
    listed = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, check=True).stdout.split(b"\0")
    paths = {repo / name.decode() for name in listed if name}
    return sum(path.stat().st_size for path in paths if path.is_file())


def piece_names(bundle: str, count: int) -> list[str]:
    """``bundle.part-aa``, ``-ab``, ...: the names ``split -a 2`` gives, which a shell glob lists in joining order."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    if count > len(letters) ** 2:
        raise ValueError(f"{bundle} would need {count} pieces; at most {len(letters) ** 2}")
    return [f"{bundle}.part-{letters[i // 26]}{letters[i % 26]}" for i in range(count)]


def bundle(wheels: list[Path], path: Path) -> Path:
    """An uncompressed tar of ``wheels`` under their own names (wheels are zip files already)."""
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for wheel in wheels:
            tar.add(wheel, arcname=wheel.name)
    return path


def cut(path: Path, largest: int) -> list[Path]:
    """``path`` as the fewest pieces of at most ``largest`` bytes, of equal size but the last; their paths, in
    joining order. Equal pieces leave room in each call beside them."""
    blob = path.read_bytes()
    count = max(1, -(-len(blob) // largest))
    size = -(-len(blob) // count)
    pieces = []
    for i, name in enumerate(piece_names(path.name, count)):
        (path.parent / name).write_bytes(blob[i * size:(i + 1) * size])
        pieces.append(path.parent / name)
    return pieces


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


def prepare(required: list[Path], optional: list[Path], out: Path, tree: int,
            limit: int = CALL_LIMIT) -> list[list[str]]:
    """Bundle and cut the wheels into ``out`` with the bundles' sums; the calls, each a list of names in ``out``:
    the required bundle's first (the sums in the first call), then the optional one's."""
    budget = limit - tree - SPARE
    if budget < MIB:
        raise ValueError(f"the working tree ({tree / MIB:.1f} MiB) leaves under a MiB of a call's "
                         f"{limit / MIB:.0f} MiB for the wheels: commit or ignore less")
    out.mkdir(parents=True, exist_ok=True)
    bundles = [bundle(wheels, out / name) for name, wheels in ((REQUIRED, required), (OPTIONAL, optional)) if wheels]
    sums = "".join(f"{hashlib.sha256(b.read_bytes()).hexdigest()}  {b.name}\n" for b in bundles)
    (out / SUMS).write_text(sums)
    calls = []
    for i, path in enumerate(bundles):
        extra = {SUMS: len(sums.encode())} if i == 0 else {}
        pieces = {p.name: p.stat().st_size for p in cut(path, budget - sum(extra.values()))}
        path.unlink()
        calls += plan_calls({**pieces, **extra}, budget)
    return calls


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("wheels", nargs="+", type=Path)
    parser.add_argument("--optional", action="append", type=Path, default=[], help="a wheel only some checks need")
    parser.add_argument("--out", type=Path, default=Path(".whl-big"))
    args = parser.parse_args(argv)
    missing = [str(w) for w in [*args.wheels, *args.optional] if not w.is_file()]
    if missing:
        print(f"error: no such wheel: {', '.join(missing)}", file=sys.stderr)
        return 2
    tree = tree_bytes()
    required = [w for w in args.wheels if w.resolve() not in {o.resolve() for o in args.optional}]
    try:
        calls = prepare(required, args.optional, args.out, tree)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    total = sum(w.stat().st_size for w in [*required, *args.optional])
    print(f"working tree {tree / MIB:.1f} MiB; wheels {total / MIB:.1f} MiB in {len(calls)} calls of at most "
          f"{(CALL_LIMIT - tree - SPARE) / MIB:.1f} MiB each")
    out = args.out.resolve().relative_to(REPO) if args.out.resolve().is_relative_to(REPO) else args.out
    stage = f"{commit_prefix()}bash benchmarks/gpu_session.sh"
    optional = [OPTIONAL in names[0] for names in calls]
    for i, names in enumerate(calls):
        carry = ", ".join(f'"{out / name}"' for name in names)
        last_of_bundle = i + 1 == len(calls) or optional[i + 1] != optional[i]
        then = f" && {stage} <stage>" if last_of_bundle else ""
        what = " (the optional bundle)" if optional[i] else ""
        print(f"call {i + 1}: carry [{carry}], command: bash benchmarks/gpu_session.sh keep{then}{what}")
    print(f"other stages, carrying nothing: {stage} <tests | stream [args] | startup>; the stages can run between the "
          f"bundles (docs/testing.md has a plan)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
