#!/usr/bin/env bash
# A single-node SLURM cluster on this machine (slurmctld + slurmd on localhost, munge authentication), for trying
# the launcher's SLURM path and for its tests (tests/run/test_slurm.py): `make slurm`, then
#   export SLURM_CONF=<state dir>/slurm.conf   (printed at the end)
# Needs root and Debian's slurm-wlm + munge (installed with apt-get when missing). Usage:
#   launch/slurm_local.sh [state dir]        (default /tmp/tta-slurm)   |   launch/slurm_local.sh --stop [state dir]
set -euo pipefail
if [ "${1:-}" = "--stop" ]; then
  dir="${2:-/tmp/tta-slurm}"
  # this cluster's jobs first (their step daemons outlive slurmd), then the daemons; SIGKILL what lingers
  SLURM_CONF="$dir/slurm.conf" timeout 20 scancel --full --quiet --user "$(id -un)" 2>/dev/null || true
  for _ in $(seq 40); do  # until their steps are gone, or 20 s
    [ -z "$(SLURM_CONF="$dir/slurm.conf" timeout 5 squeue -h 2>/dev/null)" ] && break; sleep 0.5; done
  pids=""
  for f in "$dir/slurmd.pid" "$dir/slurmctld.pid"; do [ -f "$f" ] && pids="$pids $(cat "$f")"; done
  [ -n "$pids" ] && kill $pids 2>/dev/null || true
  for _ in $(seq 10); do alive=""; for p in $pids; do kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
    [ -z "$alive" ] && break; sleep 0.5; done
  [ -n "${alive:-}" ] && kill -9 $alive 2>/dev/null || true
  rm -f "$dir/slurmd.pid" "$dir/slurmctld.pid"
  exit 0
fi
dir="${1:-/tmp/tta-slurm}"
if [ "$(id -u)" != 0 ]; then echo "a local SLURM cluster needs root (slurmd runs jobs as their users)" >&2; exit 3; fi
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  echo "installing slurm-wlm and munge (Debian)"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
fi
mkdir -p "$dir/state" "$dir/spool" /run/munge
if ! pgrep -x munged >/dev/null; then
  [ -f /etc/munge/munge.key ] || mungekey --create 2>/dev/null || create-munge-key -f
  chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
  runuser -u munge -- munged 2>/dev/null || munged --force
fi
host="$(hostname -s)"
cpus="$(getconf _NPROCESSORS_ONLN)"  # not nproc: it follows OMP_NUM_THREADS
mem_mb="$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))"
cat > "$dir/slurm.conf" <<CONF
ClusterName=tta-local
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
# a requeued job may start again after cred_expire seconds (default 120)
AuthInfo=cred_expire=10
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldPort=${TTA_SLURMCTLD_PORT:-6817}
SlurmdPort=${TTA_SLURMD_PORT:-6818}
ProctrackType=proctrack/pgid
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobRequeue=1
ReturnToService=2
SchedulerParameters=defer_no
KillWait=30
InactiveLimit=0
MinJobAge=300
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
printf "CgroupPlugin=cgroup/v1\nIgnoreSystemd=yes\n" > "$dir/cgroup.conf"  # proctrack/pgid: cgroups only for slurmd's own set-up
export SLURM_CONF="$dir/slurm.conf"
"$0" --stop "$dir"
sleep 1
slurmctld -f "$SLURM_CONF" -c
slurmd -f "$SLURM_CONF" -c 2>/dev/null || slurmd -f "$SLURM_CONF"
for _ in $(seq 60); do
  if sinfo -h -o %t 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then
    echo "SLURM is up: export SLURM_CONF=$SLURM_CONF   (sinfo; stop with $0 --stop $dir)"
    exit 0
  fi
  scontrol update nodename="$host" state=resume >/dev/null 2>&1 || true
  sleep 1
done
echo "SLURM did not come up; see $dir/slurmctld.log and $dir/slurmd.log" >&2
exit 1
