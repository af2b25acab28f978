#!/usr/bin/env bash
# There, on a lent GPU machine: join and install the wheels carried as pieces of two bundles (benchmarks/gpu_carry.py
# plans the calls), then run one stage, its logs and rows under $OUT (docs/testing.md, "On a lent GPU: the session
# kit"). Stages:
#   keep     copy the carried pieces (.whl-big/) to .whl-kept/, which stays while the machine is warm; the last
#            keep call goes on to a stage in the same command (keep && <stage>)
#   tests    the GPU tier (pytest -m gpu, one process)
#   stream   benchmarks/finite_check.py on the device, then benchmarks/gpu_stream.py with the rest of the
#            arguments (e.g. --loader --precisions bf16-mixed --precision-check none)
#   startup  benchmarks/startup.py on the GPU run of docs/results/hatvtr-runtime.md (ViT-B/32, the embedded test set)
set -uo pipefail
cd "$(dirname "$0")/.."
stage=${1:-}; shift || true
py=${PYTHON:-python3}
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 TTA_CACHE=${TTA_CACHE:-$PWD/.gpu-cache}  # in the checkout: kept between warm calls
fail() { echo "error: $*" >&2; exit 2; }
if [ "$stage" = keep ]; then
  mkdir -p .whl-kept && cp .whl-big/* .whl-kept/ && ls -la .whl-kept; exit
fi
case "$stage" in tests|stream|startup) ;; *) fail "stage must be keep, tests, stream or startup, got '$stage'";; esac
[ -f .whl-kept/SHA256SUMS ] || fail "no pieces in .whl-kept/ (the machine started cold): carry them with the keep calls first"
joined=${TMPDIR:-/tmp}/tta-wheels
rm -rf "$joined" && mkdir -p "$joined/wheels"
while read -r sum name; do  # the bundles benchmarks/gpu_carry.py made: required.tar, optional.tar
  n=$(ls .whl-kept/"$name".part-* 2>/dev/null | wc -l)
  if [ "$n" = 0 ] && [ "$name" = optional.tar ]; then
    echo "note: the optional bundle was not carried; what needs the embedded text trunk (the precision check," \
      "the GPU tests on the tiny benchmark) is skipped"
    continue
  fi
  cat .whl-kept/"$name".part-* > "$joined/$name" 2>/dev/null
  echo "$sum  $joined/$name" | sha256sum -c --status || fail "the $n piece(s) of $name in .whl-kept/ do not join into it: carry the missing ones with a keep call"
  tar -xf "$joined/$name" -C "$joined/wheels" || fail "$name joined but does not unpack"
done < .whl-kept/SHA256SUMS
"$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  "$joined"/wheels/*.whl || fail "installing the carried wheels failed (see above)"
export PYTHONPATH=/tmp/site:$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc
  "$py" -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__)"
  git rev-parse --short HEAD 2>/dev/null || echo "commit ${TTA_COMMIT:-unknown: set TTA_COMMIT} (TTA_COMMIT)"
  date -u; } 2>&1 | tee "$out/machine.txt"
case "$stage" in
  tests)
    "$py" -m pytest -m gpu -p no:xdist -rs -q 2>&1 | tee "$out/gpu-tests.log" ;;
  stream)
    "$py" benchmarks/finite_check.py --device cuda 2>&1 | tee "$out/finite-check.log"
    "$py" benchmarks/gpu_stream.py --json "$out/gpu-stream.json" --rows "$out/gpu-stream.jsonl" "$@" 2>&1 \
      | tee "$out/gpu-stream.log" ;;
  startup)
    root=$("$py" -c "from tta.data.registry import dataset_root; from tta.utils.config import compose
from tta.utils.paths import cache_root
base = compose('run', ['data=synth']); print(dataset_root(base.data, cache_root(base.paths.cache_dir)))" | tail -1)
    "$py" benchmarks/startup.py --rounds 2 --goal 10 --json "$out/startup.json" task=v2t model=xpool model.arch=ViT-B-32 \
      model.checkpoint=none data=msrvtt "data.root=$root" shift=gaussian shift.severity=5 trainer.accelerator=gpu "$@" \
      2>&1 | tee "$out/startup.log" ;;
esac
