#!/usr/bin/env bash
# There, on a lent GPU machine: install the wheels carried from benchmarks/gpu_wheels.sh, then run one stage, its
# logs and rows under $OUT (docs/testing.md, "On a lent GPU"). Stages:
#   keep     copy the carried PyAV pieces (.whl-av/) to .whl-kept/, which stays while the machine is warm
#   tests    the GPU tier (pytest -m gpu, one process)
#   stream   benchmarks/gpu_stream.py --loader (the rest of the arguments go to it, e.g. --precisions 32-true)
#   startup  benchmarks/startup.py on the GPU run of docs/results/hatvtr-runtime.md (ViT-B/32, the embedded test set)
set -uo pipefail
cd "$(dirname "$0")/.."
stage=${1:-}; shift || true
py=${PYTHON:-python3}
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 TTA_CACHE=${TTA_CACHE:-$PWD/.gpu-cache}  # in the checkout: kept between warm calls
if [ "$stage" = keep ]; then
  mkdir -p .whl-kept && cp .whl-av/* .whl-kept/ && ls -la .whl-kept; exit
fi
case "$stage" in tests|stream|startup) ;; *) echo "error: stage must be keep, tests, stream or startup, got '$stage'" >&2; exit 2;; esac
[ -f .whl-kept/NAME ] || { echo "error: no PyAV pieces in .whl-kept/ (the machine started cold): run the keep stage once per piece first" >&2; exit 2; }
wheel=/tmp/$(awk '{print $2}' .whl-kept/NAME)
cat .whl-kept/av.part-* > "$wheel"
echo "$(awk '{print $1}' .whl-kept/NAME)  $wheel" | sha256sum -c --status || {
  echo "error: the PyAV pieces in .whl-kept/ ($(ls .whl-kept | grep -c part)) do not join into $(basename "$wheel"): carry the missing ones with the keep stage" >&2; exit 2; }
"$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  "$wheel" || { echo "error: installing the carried wheels failed (see above)" >&2; exit 2; }
export PYTHONPATH=/tmp/site:$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc
  "$py" -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__)"
  git rev-parse --short HEAD 2>/dev/null; date -u; } 2>&1 | tee "$out/machine.txt"
case "$stage" in
  tests)
    "$py" -m pytest -m gpu -p no:xdist -rs -q 2>&1 | tee "$out/gpu-tests.log" ;;
  stream)
    "$py" benchmarks/gpu_stream.py --loader --json "$out/gpu-stream.json" --rows "$out/gpu-stream.jsonl" "$@" 2>&1 \
      | tee "$out/gpu-stream.log" ;;
  startup)
    root=$("$py" -c "from tta.data.registry import dataset_root; from tta.utils.config import compose
from tta.utils.paths import cache_root
base = compose('run', ['data=synth']); print(dataset_root(base.data, cache_root(base.paths.cache_dir)))" | tail -1)
    "$py" benchmarks/startup.py --rounds 2 --goal 10 --json "$out/startup.json" task=v2t model=xpool model.arch=ViT-B-32 \
      model.checkpoint=none data=msrvtt "data.root=$root" shift=gaussian shift.severity=5 trainer.accelerator=gpu "$@" \
      2>&1 | tee "$out/startup.log" ;;
esac
