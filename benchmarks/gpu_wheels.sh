#!/usr/bin/env bash
# Here, before a lent GPU session: the wheels of the packages the GPU image lacks, for its Python 3.12, in the
# versions of this checkout's .venv (docs/testing.md, "On a lent GPU"). .whl/ holds the small ones (one call's
# carry); PyAV (about 36 MB, too large beside the working tree in one call) is split into .whl-av/av.part-* pieces
# of at most 18 MiB, carried one per call and joined there by benchmarks/gpu_session.sh.
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
rm -rf .whl .whl-av && mkdir -p .whl .whl-av
"$py" -m pip download -q --no-deps "${platforms[@]}" -d .whl "${small[@]}"
"$py" -m pip wheel -q --no-deps -w .whl "antlr4-python3-runtime==$(version antlr4-python3-runtime)"  # an sdist only
"$py" -m pip download -q --no-deps "${platforms[@]}" -d .whl-av "av==$(version av)"
(cd .whl-av && sha256sum av-*.whl > NAME && split -b 18M -a 2 av-*.whl av.part- && rm av-*.whl)  # NAME: sum, file
du -sh .whl .whl-av/av.part-*
echo "wheels ready: $(ls .whl | tr '\n' ' ')and $(awk '{print $2}' .whl-av/NAME) in $(ls .whl-av/av.part-* | wc -l) pieces"
