#!/usr/bin/env bash
# Reproduce the HAT-VTR paper's main tables (Tables 1-5) on a SLURM cluster with the real datasets and checkpoints:
# one Hydra multirun per table, each an experiment config in conf/experiment/ (the sweep is written there).
#
#   bash launch/paper_tables.sh <cluster overlay> [table ...]      e.g.  bash launch/paper_tables.sh example_cluster 1 3
#
# Needs: pip install -e '.[slurm,report]'; dataset roots in MSRVTT_ROOT / ACTIVITYNET_ROOT / LSMDC_ROOT / MSVD_ROOT /
# DIDEMO_ROOT (conf/data/*.yaml); converted fine-tuned checkpoints (python -m tta.models.convert) named
# <model>_<dataset>.pt in CKPT_DIR; a cluster overlay in launch/hydra/launcher/<name>.yaml (see example_cluster.yaml).
# Each experiment writes outputs/experiments/<experiment>; re-running finishes only the missing jobs, and
# `python -m tta.report outputs/experiments/<experiment>` renders it (compare with launch/README.md).
set -euo pipefail
cluster=${1:?usage: paper_tables.sh <cluster overlay> [table ...]}; shift
tables=${*:-1 2 3 4 5}
: "${CKPT_DIR:?set CKPT_DIR to the folder of converted checkpoints (<model>_<dataset>.pt)}"

for t in $tables; do
  case $t in
    1) experiments="paper-table1-qs-v2t-msrvtt" ;;
    2) experiments="paper-table2-qs-v2t-other-datasets" ;;
    3) experiments="paper-table3-qs-t2v-msrvtt" ;;
    4) experiments="paper-table4-cross-msrvtt-to-activitynet paper-table4-cross-activitynet-to-msrvtt" ;;
    5) experiments="paper-table5-zeroshot" ;;
    *) echo "unknown table $t (1-5)" >&2; exit 2 ;;
  esac
  for e in $experiments; do
    python -m tta.run -m --config-dir launch "hydra/launcher=${cluster}" "experiment=$e"
  done
done
