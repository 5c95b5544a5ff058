#!/usr/bin/env bash
# A one-node Slurm cluster on this machine: for the test command's Slurm test
# and for trying `workbench run --slurm` without a real cluster.
#
#   scripts/slurm-cluster.sh start [DIR]   # then: export SLURM_CONF=DIR/slurm.conf
#   scripts/slurm-cluster.sh stop [DIR]
#
# Debian's slurm-wlm (22.05) and munge, as root: munged as the `munge` user
# with a generated 1 KiB key; slurmctld and slurmd as root (SlurmUser=root),
# with process tracking by /proc (no cgroups), no task plugin and no
# accounting; configuration, state, spool and logs under DIR (default
# /tmp/wb-slurm). One node: this machine, with its CPUs and 90 % of its
# memory. Both daemons are addressed at 127.0.0.1 (SlurmctldHost's and
# NodeAddr's address, whatever the host name resolves to) and bind to it
# alone (CommunicationParameters=NoCtldInAddrAny,NoInAddrAny).
set -euo pipefail
cmd=${1:-}
dir=${2:-/tmp/wb-slurm}
conf="$dir/slurm.conf"

# Stops what `start` started in $dir and waits (up to 10 s each) until it
# has exited, so that a start right after finds the ports free.
stop() {
    local pids=()
    for d in slurmd slurmctld; do
        if [ -f "$dir/$d.pid" ]; then
            pids+=("$(cat "$dir/$d.pid")")
            rm -f "$dir/$d.pid"
        fi
    done
    if [ -f "$dir/munged.started" ]; then
        pids+=($(pgrep -x munged || true))
        rm -f "$dir/munged.started"
    fi
    for p in "${pids[@]}"; do
        kill "$p" 2>/dev/null || true
    done
    for p in "${pids[@]}"; do
        for _ in $(seq 100); do
            kill -0 "$p" 2>/dev/null || break
            sleep 0.1
        done
    done
}

case "$cmd" in
start)
    for b in slurmctld slurmd sbatch squeue sinfo munged; do
        if ! command -v "$b" >/dev/null; then
            echo "slurm-cluster: $b not found: apt-get install slurm-wlm munge (scripts/setup.sh installs them)" >&2
            exit 1
        fi
    done
    if [ "$(id -u)" -ne 0 ]; then
        echo "slurm-cluster: a one-node cluster runs its daemons as root; run as root" >&2
        exit 1
    fi
    stop
    mkdir -p "$dir/state" "$dir/spool" "$dir/log"
    # munge: a key only munge can read, and its run, log and state directories.
    mkdir -p /etc/munge /run/munge /var/log/munge /var/lib/munge
    if [ ! -s /etc/munge/munge.key ]; then
        dd if=/dev/urandom bs=1024 count=1 of=/etc/munge/munge.key status=none
    fi
    chown munge:munge /etc/munge/munge.key /run/munge /var/log/munge /var/lib/munge
    chmod 400 /etc/munge/munge.key
    if ! pgrep -x munged >/dev/null; then
        runuser -u munge -- /usr/sbin/munged
        touch "$dir/munged.started"
    fi
    host=$(hostname -s)
    cpus=$(nproc)
    mem_mb=$(($(awk '/^MemTotal/ {print $2}' /proc/meminfo) / 1024 * 9 / 10))
    cat >"$conf" <<EOF
# Written by scripts/slurm-cluster.sh: a one-node cluster for tests.
ClusterName=workbench
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
    export SLURM_CONF="$conf"
    slurmctld
    slurmd
    # The node is ready when the controller reports it idle.
    for _ in $(seq 60); do
        if [ "$(sinfo -h -o %T 2>/dev/null | head -1)" = idle ]; then
            echo "slurm-cluster: one node ($host, $cpus CPUs) up; export SLURM_CONF=$conf"
            exit 0
        fi
        sleep 0.5
    done
    echo "slurm-cluster: the node did not become idle in 30 s; logs in $dir/log:" >&2
    tail -n 5 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 || true
    stop
    exit 1
    ;;
stop)
    stop
    ;;
*)
    echo "usage: $0 start|stop [DIR]" >&2
    exit 2
    ;;
esac
