#!/usr/bin/env bash
# A one-node SLURM cluster on this machine (Debian's slurm-wlm + munge), with two fake GPUs so `--gpus=1` jobs
# schedule, two at once, a disk of its own for scratch (a 4 GB tmpfs, the node's TmpDisk that jobs' --tmp is checked
# against; not the working directory's filesystem), and each job bound to the CPUs it was allocated (task/affinity), as
# a cluster's cgroups hold it: a job step's Snakemake, run with
# `--cores all`, then runs a group job's members one at a time on a one-CPU allocation, not side by side.
# Usage: local_cluster.sh start | stop | scratch (prints the scratch folder). Needs root. Facts and pitfalls:
# docs/cluster.md.
set -euo pipefail
STATE=${SLURM_LOCAL_STATE:-/tmp/slurm-local}
CONF_DIR=$STATE/etc
SCRATCH=$STATE/node-scratch

install() {
    command -v slurmctld >/dev/null && command -v munged >/dev/null && return
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
}

write_config() {
    local host cpus mem
    host=$(hostname -s)
    # The machine's real cores, so SLURM runs side by side only what they can run (at least 2: two grouped GPU jobs
    # of one CPU each, tests/slurm/profile's `cores: 1`, run at once).
    cpus=$(( $(nproc) > 2 ? $(nproc) : 2 ))
    mem=$(( $(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo) * 8 / 10 ))
    mkdir -p "$CONF_DIR" "$STATE/spool/ctld" "$STATE/spool/d" "$STATE/log"
    # A GPU generic resource must be backed by a character device: /dev/null's numbers stand in for it.
    for gpu in 0 1; do [ -e "$STATE/fakegpu$gpu" ] || mknod "$STATE/fakegpu$gpu" c 1 3; done
    cat > "$CONF_DIR/slurm.conf" <<CONF
ClusterName=local
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$STATE/spool/ctld
SlurmdSpoolDir=$STATE/spool/d
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MinJobAge=600
ReturnToService=2
SlurmdParameters=config_overrides
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=2
GresTypes=gpu
TmpFS=$SCRATCH
NodeName=$host CPUs=$cpus RealMemory=$mem Gres=gpu:2 TmpDisk=4096 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$host MaxTime=INFINITE State=UP
CONF
    echo "NodeName=$host Name=gpu File=$STATE/fakegpu[0-1]" > "$CONF_DIR/gres.conf"
    # The jobstep plugin drops SLURM_CONF before its inner srun: the config must sit at the default path.
    mkdir -p /etc/slurm
    ln -sf "$CONF_DIR/slurm.conf" /etc/slurm/slurm.conf
    ln -sf "$CONF_DIR/gres.conf" /etc/slurm/gres.conf
}

start() {
    if pgrep -x slurmctld >/dev/null || pgrep -x slurmd >/dev/null; then  # not ours: never disturb or stop it
        echo "a SLURM daemon already runs on this machine; stop it first (this script stops only what it starts)" >&2
        exit 1
    fi
    install
    write_config
    mkdir -p /run/munge && chown munge:munge /run/munge
    if ! pgrep -x munged >/dev/null; then  # remember a munged we start, so that stop ends ours and no other
        runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid
        cp /run/munge/munged.pid "$STATE/munged.pid"
    fi
    mkdir -p "$SCRATCH"
    if ! mountpoint -q "$SCRATCH"; then  # remember a mount we make, so that stop undoes ours and no other
        mount -t tmpfs -o size=4g,mode=1777 node-scratch "$SCRATCH"
        touch "$STATE/scratch.mounted"
    fi
    /usr/sbin/slurmctld
    /usr/sbin/slurmd
    for _ in $(seq 60); do
        [ "$(sinfo -h -o %t 2>/dev/null | head -1)" = idle ] && { sinfo; return; }
        sleep 1
    done
    echo "SLURM did not come up; logs in $STATE/log" >&2
    tail -20 "$STATE"/log/*.log >&2
    exit 1
}

stop() {
    for pidfile in "$STATE/slurmd.pid" "$STATE/slurmctld.pid" "$STATE/munged.pid"; do
        [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null && rm -f "$pidfile"
    done
    [ -f "$STATE/scratch.mounted" ] && umount "$SCRATCH" && rm -f "$STATE/scratch.mounted"
    # With the config left in place, every later `import snakemake` (its SLURM plugin) waits ~10 s for a controller.
    for link in /etc/slurm/slurm.conf /etc/slurm/gres.conf; do
        [ "$(readlink "$link")" = "$CONF_DIR/$(basename "$link")" ] && rm -f "$link"
    done
    return 0
}

scratch() {
    echo "$SCRATCH"
}

"${1:?usage: $0 start|stop|scratch}"
