#!/bin/bash
# Start a one-node Slurm cluster (munged + slurmctld + slurmd) on this machine,
# without systemd. Needs root and Debian packages: slurm-wlm (or slurmctld slurmd slurm-client) munge.
# Usage: tests/slurm/start_slurm.sh            -> prints the slurm.conf path on the last line
#        SLURM_TRY_DIR=/some/dir   -> where conf/state/spool/logs go (default /tmp/slurm_try)
#        SLURM_TRY_CLEAN=1         -> wipe saved controller state (old jobs) before starting
set -euo pipefail
DIR=${SLURM_TRY_DIR:-/tmp/slurm_try}
CONF=$DIR/slurm.conf
TIMEOUT=${SLURM_TRY_TIMEOUT:-60}
export SLURM_CONF=$CONF
[ "$(id -u)" = 0 ] || { echo "start_slurm.sh: must run as root" >&2; exit 1; }
for b in munged slurmctld slurmd sinfo scontrol; do
  command -v $b >/dev/null || { echo "start_slurm.sh: $b not found (apt-get install -y slurm-wlm munge)" >&2; exit 1; }
done
mkdir -p "$DIR"/state "$DIR"/spool "$DIR"/log
[ "${SLURM_TRY_CLEAN:-0}" = 1 ] && rm -rf "$DIR"/state/* "$DIR"/spool/*

# ---- munge ----
if [ ! -s /etc/munge/munge.key ]; then
  mkdir -p /etc/munge
  if command -v mungekey >/dev/null; then mungekey -c -f -k /etc/munge/munge.key; else create-munge-key -f; fi
  chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
fi
mkdir -p /run/munge /var/lib/munge /var/log/munge
chown munge:munge /run/munge /var/lib/munge /var/log/munge; chmod 755 /run/munge
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  runuser -u munge -- /usr/sbin/munged
  for _ in $(seq 1 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
  munge -n | unmunge >/dev/null || { echo "start_slurm.sh: munged did not come up" >&2; exit 1; }
  touch "$DIR"/.munged_started_by_us
fi

# ---- slurm.conf (regenerated each start from this machine's hardware) ----
HOST=$(hostname -s)
NODELINE=$(slurmd -C | head -1)   # NodeName=<host> CPUs=.. Boards=.. SocketsPerBoard=.. CoresPerSocket=.. ThreadsPerCore=.. RealMemory=..
cat > "$CONF" <<CONFEOF
ClusterName=localcluster
SlurmctldHost=$HOST
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
$NODELINE
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONFEOF

running() { pgrep -f "^$1 -f $CONF\$" >/dev/null; }   # a daemon started by this script with this conf
running slurmctld || slurmctld -f "$CONF"
running slurmd    || slurmd -f "$CONF"

# ---- wait for the node to be idle ----
st=""
for _ in $(seq 1 $((TIMEOUT*2))); do
  st=$(sinfo -h -n "$HOST" -o %T 2>/dev/null || true)
  case "$st" in
    idle|mixed|allocated) break ;;
    down*|drain*) scontrol update NodeName="$HOST" State=RESUME 2>/dev/null || true ;;
  esac
  sleep 0.5
done
case "$st" in
  idle|mixed|allocated) ;;
  *) echo "start_slurm.sh: node $HOST not ready (state '$st'); see $DIR/log/" >&2; exit 1 ;;
esac
echo "slurm up: node $HOST is $st; use: export SLURM_CONF=$CONF" >&2
echo "$CONF"
