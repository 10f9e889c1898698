#!/bin/bash
# Stop the one-node cluster started by start_slurm.sh (slurmctld, slurmd, and munged if we started it).
set -uo pipefail
DIR=${SLURM_TRY_DIR:-/tmp/slurm_try}
CONF=$DIR/slurm.conf
export SLURM_CONF=$CONF
# a pid from a pid file counts only if that process really is slurmctld/slurmd (no stale-pid kills)
pidof_file() { local p; p=$(cat "$1" 2>/dev/null) || return 0; case "$(ps -o comm= -p "$p" 2>/dev/null)" in slurmctld|slurmd) echo "$p";; esac; }
# pids from the pid files, plus any daemon started with exactly this conf (slurmd may delete its pid file before it exits)
PIDS="$(pidof_file "$DIR"/slurmctld.pid) $(pidof_file "$DIR"/slurmd.pid) $(pgrep -f "^slurm(ctld|d) -f $CONF\$" || true)"
PIDS=$(echo "$PIDS" | tr ' ' '\n' | sort -u | tr '\n' ' ')
anyalive() { for p in $PIDS; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }
waitpids() { for _ in $(seq 1 "$1"); do anyalive || return 0; sleep 0.1; done; return 1; }

if [ -n "${PIDS// /}" ]; then
  scancel --full -u "$(id -un)" 2>/dev/null || true   # cancel queued/running jobs
  # let the cancelled jobs finish (epilog-complete reaches slurmctld), else slurmd retries ~10 s on shutdown
  for _ in $(seq 1 100); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.1; done
  scontrol shutdown 2>/dev/null || true                 # asks slurmctld and slurmd to exit
  if ! waitpids 150; then                               # up to 15 s, then TERM, then KILL
    for p in $PIDS; do kill -TERM "$p" 2>/dev/null; done
    waitpids 50 || for p in $PIDS; do kill -KILL "$p" 2>/dev/null; done
  fi
fi
rm -f "$DIR"/slurmctld.pid "$DIR"/slurmd.pid
if [ -e "$DIR"/.munged_started_by_us ]; then
  munged --stop 2>/dev/null || { [ -s /run/munge/munged.pid ] && kill -TERM "$(cat /run/munge/munged.pid)"; }
  for _ in $(seq 1 50); do [ -e /run/munge/munged.pid ] || break; sleep 0.1; done
  rm -f "$DIR"/.munged_started_by_us
fi
echo "slurm stopped" >&2
