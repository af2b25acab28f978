#!/usr/bin/env bash
# Reproduce the HAT-VTR paper's main tables (Tables 1-5) on a SLURM cluster with the real datasets and checkpoints.
#
#   bash launch/paper_tables.sh <cluster overlay> [table ...]      e.g.  bash launch/paper_tables.sh example_cluster 1 3
#
# Needs: pip install -e '.[slurm,report]'; dataset roots in MSRVTT_ROOT / ACTIVITYNET_ROOT / LSMDC_ROOT / MSVD_ROOT /
# DIDEMO_ROOT (conf/data/*.yaml); converted fine-tuned checkpoints (python -m tta.models.convert) named as below in
# CKPT_DIR; a cluster overlay in launch/hydra/launcher/<name>.yaml (see example_cluster.yaml). Each table is one
# Hydra multirun into outputs/paper/table<N>; re-running a table finishes only the missing jobs, and
# `python -m tta.report outputs/paper/table<N>` renders it next to the paper's numbers in launch/README.md.
set -euo pipefail
cluster=${1:?usage: paper_tables.sh <cluster overlay> [table ...]}; shift
tables=${*:-1 2 3 4 5}
CKPT_DIR=${CKPT_DIR:?set CKPT_DIR to the folder of converted checkpoints (<model>_<dataset>.pt)}
VIDEO_SHIFTS=gaussian,impulse,fog,snow,elastic_distortion,h264_compression,motion_blur,video_defocus,main_object_occlusion,style_transfer,event_insertion,temporal_scrambling
TEXT_SHIFTS=ocr,char_insert,char_replace,char_swap,char_delete,synonym_replace,word_insert,word_swap,word_delete,insert_punctuation,back_translation,formal,casual,passive,active
ADAPTERS=source,tent,read,sar,eata,tcr,hatvtr
REAL="model.arch=ViT-B-32-quickgelu"
run() { python -m tta.run -m --config-dir launch "hydra/launcher=${cluster}" "$@"; }

for t in $tables; do
  case $t in
    1)  # Table 1: QS v2t on MSR-VTT, 12 MLVP shifts at severity 5, both backbones, all adapters
      for m in clip4clip xpool; do
        run hydra.sweep.dir=outputs/paper/table1 data=msrvtt task=v2t "model=$m" $REAL \
          "model.checkpoint=$CKPT_DIR/${m}_msrvtt.pt" "adapter=$ADAPTERS" "shift=$VIDEO_SHIFTS" shift.severity=5
      done ;;
    2)  # Table 2: QS v2t on ActivityNet, LSMDC, MSVD, DiDeMo (severity 5)
      for d in activitynet lsmdc msvd didemo; do for m in clip4clip xpool; do
        run hydra.sweep.dir=outputs/paper/table2 "data=$d" task=v2t "model=$m" $REAL \
          "model.checkpoint=$CKPT_DIR/${m}_${d}.pt" "adapter=$ADAPTERS" "shift=$VIDEO_SHIFTS" shift.severity=5
      done; done ;;
    3)  # Table 3: QS t2v on MSR-VTT, 15 text shifts at the default severities (char 7, word 2, sentence 1)
      for m in clip4clip xpool; do
        run hydra.sweep.dir=outputs/paper/table3 data=msrvtt task=t2v "model=$m" $REAL \
          "model.checkpoint=$CKPT_DIR/${m}_msrvtt.pt" "adapter=$ADAPTERS" "shift=$TEXT_SHIFTS"
      done ;;
    4)  # Table 4: QGS cross-dataset, MSR-VTT <-> ActivityNet, both directions, clean queries and gallery
      for pair in "msrvtt activitynet" "activitynet msrvtt"; do set -- $pair; for m in clip4clip xpool; do
        run hydra.sweep.dir=outputs/paper/table4 scenario=cross "data=$2" "scenario.train_data=$1" "model=$m" $REAL \
          "model.checkpoint=$CKPT_DIR/${m}_$1.pt" task=v2t,t2v adapter=source,tcr,hatvtr
      done; done ;;
    5)  # Table 5: zero-shot CLIP ViT-B/32 (OpenAI weights), MSR-VTT and ActivityNet, both directions
      run hydra.sweep.dir=outputs/paper/table5 scenario=zeroshot data=msrvtt,activitynet model=clip \
        model.arch=ViT-B-32-quickgelu "model.pretrained=${CLIP_WEIGHTS:-openai}" task=v2t,t2v adapter=source,tcr,hatvtr ;;
    *) echo "unknown table $t (1-5)" >&2; exit 2 ;;
  esac
done
