#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, for tests/workflow/test_slurm.py or by hand: installs
# Debian's slurmctld, slurmd, slurm-client and munge if missing, writes /etc/slurm/slurm.conf
# (the SLURM executor strips SLURM_CONF from jobs, so it must sit there), starts munged,
# slurmctld and slurmd in the background and waits until the node is idle. Idempotent: a daemon
# already running is left alone. Needs root and apt-get; stop with tests/cluster/stop-slurm.sh.
set -euo pipefail

STATE=/run/dtr-holes-slurm                 # pid files; started/ lists what this script started
CONF=/etc/slurm/slurm.conf
MARK="# Written by dtr-holes tests/cluster/start-slurm.sh; rewritten on every start."
NODE="$(hostname -s)"
TIMEOUT="${SLURM_START_TIMEOUT:-90}"       # seconds to wait for each daemon and the idle node

install_packages() {
    local packages=(slurmctld slurmd slurm-client munge)
    command -v slurmctld slurmd sbatch munged >/dev/null 2>&1 && return
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq --no-install-recommends "${packages[@]}" ||
        { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${packages[@]}"; }
}

# One node: this machine, reached on loopback, with what slurmd detects (CPUs, memory). No
# systemd, cgroups or accounting database in a container, hence linuxproc, task/none and
# accounting_storage/none. MinJobAge keeps finished jobs visible to squeue for 5 minutes,
# which the executor's squeue status command needs (at least 3x its first status delay).
write_config() {
    if [[ -f "$CONF" ]] && ! grep -qxF "$MARK" "$CONF"; then
        echo "start-slurm.sh: $CONF exists and was not written by this script; not touching it" >&2
        exit 1
    fi
    local hardware
    hardware="$(slurmd -C | head -1 | sed "s/^NodeName=[^ ]* //")"
    mkdir -p /etc/slurm "$STATE/started" /var/lib/slurm/slurmctld /var/lib/slurm/slurmd \
        /var/log/slurm
    cat >"$CONF.new" <<CONF
$MARK
ClusterName=dtrholes
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MinJobAge=300
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
NodeName=$NODE NodeAddr=127.0.0.1 $hardware State=UNKNOWN
PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
    mv "$CONF.new" "$CONF"
}

wait_for() {  # wait_for WHAT COMMAND...: retries COMMAND until it succeeds or TIMEOUT passes
    local what="$1" deadline=$((SECONDS + TIMEOUT))
    shift
    until "$@" >/dev/null 2>&1; do
        if ((SECONDS >= deadline)); then
            echo "start-slurm.sh: no $what after ${TIMEOUT}s" >&2
            exit 1
        fi
        sleep 0.5
    done
}

running() {  # running NAME PIDFILE: the pid file names a live process called NAME
    [[ -f "$2" && "$(cat "/proc/$(cat "$2")/comm" 2>/dev/null)" == "$1" ]]
}

started() {  # started NAME PIDFILE: remember a daemon this script started, for stop-slurm.sh
    wait_for "$1 (pid file $2)" running "$1" "$2"
    cp "$2" "$STATE/started/$1.pid"
    echo "start-slurm.sh: started $1 (pid $(cat "$2"))"
}

munge_works() { munge -n | unmunge; }

start_munged() {
    munge_works >/dev/null 2>&1 && return
    [[ -f /etc/munge/munge.key ]] || mungekey --create --keyfile /etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key
    install -d -o munge -g munge -m 0755 /run/munge
    runuser -u munge -- munged
    started munged /run/munge/munged.pid
    wait_for "munge credentials" munge_works
}

start_slurmctld() {
    running slurmctld "$STATE/slurmctld.pid" && return
    slurmctld -c  # -c: a fresh job state, no jobs left over from an earlier cluster
    started slurmctld "$STATE/slurmctld.pid"
    wait_for "answer from slurmctld" scontrol ping
}

start_slurmd() {
    running slurmd "$STATE/slurmd.pid" && return
    slurmd
    started slurmd "$STATE/slurmd.pid"
}

node_idle() { [[ "$(sinfo -h -n "$NODE" -o %T)" == idle ]]; }

[[ $EUID -eq 0 ]] || { echo "start-slurm.sh: must run as root" >&2; exit 1; }
install_packages
write_config
start_munged
start_slurmctld
start_slurmd
wait_for "idle node $NODE" node_idle
echo "start-slurm.sh: node $NODE idle after ${SECONDS}s"
