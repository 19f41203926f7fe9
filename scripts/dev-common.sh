# Sourced by scripts/dev-up and scripts/dev-down: stopping a process they started
# earlier (not a child of theirs by now), and waiting until it has really ended.

# Whether PID has ended: gone, or a zombie nobody has reaped yet (a daemon started
# by an earlier dev-up has been re-parented, and some inits reap late; kill -0 and
# `tail --pid` still take a zombie for alive).
dev_process_ended() {
    local state
    state=$(awk '{ sub(/.*\) /, ""); print $1 }' "/proc/$1/stat" 2>/dev/null) || return 0
    [ -z "$state" ] || [ "$state" = Z ]
}

# dev_stop PIDFILE NAME: stops the process in PIDFILE when it still is the program
# NAME (a PID reused by another program is left alone): SIGTERM, then SIGKILL after
# 5 s (it may have SIGTERM blocked, inherited from whatever started it); waits until
# it has ended, and removes PIDFILE.
dev_stop() {
    local pidfile=$1 name=$2 pid exe deadline
    [ -s "$pidfile" ] || { rm -f "$pidfile"; return 0; }
    pid=$(cat "$pidfile")
    exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || exe=
    exe=${exe% (deleted)}  # rebuilt since it started
    if [ "${exe##*/}" = "$name" ] && kill "$pid" 2>/dev/null; then
        local killed=
        deadline=$((SECONDS + 5))
        until dev_process_ended "$pid"; do
            if [ $SECONDS -ge $deadline ]; then
                if [ -n "$killed" ]; then
                    echo "$(basename "$0"): $name (pid $pid) does not end, even after SIGKILL" >&2
                    return 1
                fi
                kill -KILL "$pid" 2>/dev/null || true
                killed=1
                deadline=$((SECONDS + 5))
            fi
            sleep 0.02  # polling a process that is not our child, with a deadline
        done
    fi
    rm -f "$pidfile"
}
