#!/usr/bin/env bash
# Start a one-node SLURM cluster on this machine (munge + slurmctld + slurmd), for CI and for
# trying `hydra/launcher=slurm` without a real cluster. Needs root and Debian's
# `slurmctld slurmd munge` packages (.ci/run installs them). Idempotent: re-running restarts.
set -euo pipefail

host=$(hostname -s)
cpus=$(nproc)
mem_mb=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 * 8 / 10 ))
conf=/etc/slurm/slurm.conf

mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge
chown slurm:slurm /var/spool/slurmctld /var/log/slurm
[ -s /etc/munge/munge.key ] || mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null \
  || dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
chown munge:munge /etc/munge/munge.key /run/munge
chmod 400 /etc/munge/munge.key

cat > "$conf" <<CONF
ClusterName=seqq-ci
SlurmctldHost=${host}
SlurmUser=slurm
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
SlurmdTimeout=300
InactiveLimit=0
KillWait=30
MinJobAge=300
NodeName=${host} NodeAddr=127.0.0.1 CPUs=${cpus} RealMemory=${mem_mb} State=UNKNOWN
PartitionName=debug Nodes=${host} Default=YES MaxTime=INFINITE State=UP
CONF
# slurmd 22.05 loads a cgroup plugin even with proctrack/linuxproc; v1 works in containers.
echo "CgroupPlugin=autodetect" > /etc/slurm/cgroup.conf
echo "IgnoreSystemd=yes" >> /etc/slurm/cgroup.conf

# Stop earlier instances by their pid files (a package's postinst may have started them).
for pidfile in /run/slurmd.pid /run/slurmctld.pid /run/munge/munged.pid; do
  pid=$(cat "$pidfile" 2>/dev/null || true)
  if [ -n "$pid" ] && kill "$pid" 2>/dev/null; then
    for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  fi
  rm -f "$pidfile"
done
runuser -u munge -- /usr/sbin/munged --force
/usr/sbin/slurmctld -c
/usr/sbin/slurmd -c
for _ in $(seq 30); do
  if sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
    sinfo
    exit 0
  fi
  scontrol update nodename="$host" state=resume >/dev/null 2>&1 || true
  sleep 1
done
echo "slurm did not come up; logs:" >&2
tail -n 30 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2
exit 1
