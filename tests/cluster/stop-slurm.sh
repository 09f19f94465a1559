#!/usr/bin/env bash
# Stops the daemons tests/cluster/start-slurm.sh started, by the pids it recorded, and nothing
# else; first cancels the jobs left on a cluster it started (a run killed by its timeout), whose
# job steps would outlive slurmd. Idempotent: with nothing recorded it does nothing.
set -euo pipefail

STARTED=/run/dtr-holes-slurm/started
GRACE=15  # seconds before SIGTERM becomes SIGKILL

is() { [[ "$(cat "/proc/$2/comm" 2>/dev/null)" == "$1" ]]; }  # is NAME PID

stop() {  # stop NAME: SIGTERM the recorded pid, SIGKILL it if still there after GRACE
    local record="$STARTED/$1.pid" pid
    [[ -f "$record" ]] || return 0
    pid="$(cat "$record")"
    if is "$1" "$pid"; then  # not a recycled pid: the daemon itself
        kill -TERM "$pid"
        for _ in $(seq $((GRACE * 10))); do
            is "$1" "$pid" || break
            sleep 0.1
        done
        is "$1" "$pid" && kill -KILL "$pid"
        echo "stop-slurm.sh: stopped $1 (pid $pid)"
    fi
    rm -f "$record"
}

cancel_jobs() {  # on our own test cluster only: every job in its queue is a test's
    [[ -f "$STARTED/slurmctld.pid" ]] || return 0
    scancel --user "$(id -un)" 2>/dev/null || return 0
    for _ in $(seq $((GRACE * 10))); do
        [[ -z "$(squeue -h -t RUNNING,COMPLETING 2>/dev/null)" ]] && return
        sleep 0.1
    done
}

cancel_jobs
# slurmd first, munged last: the others need it to say goodbye.
for daemon in slurmd slurmctld munged; do
    stop "$daemon"
done
