#!/usr/bin/env bash
# Stop the test cluster that start.sh started in STATE_DIR (default: $SLURM_TESTCLUSTER_STATE
# or ./state): cancel its jobs, then TERM (then KILL) exactly the daemons whose PIDs start.sh
# recorded in STATE_DIR/pids, and any slurmstepd or job process of this cluster left over.
# Two nodes: their network namespaces, the switch namespace (with the bridge), this host's link to it and
# /etc/netns/<ns> go too (--net-only: just those).
# Idempotent; the state folder (logs, accounting data) is kept.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
NET_ONLY=0
[[ "${1:-}" == --net-only ]] && { NET_ONLY=1; shift; }
S=${1:-${SLURM_TESTCLUSTER_STATE:-$here/state}}
[[ -d "$S" ]] || exit 0
S=$(cd "$S" && pwd -P)
[[ -d "$S/pids" ]] || exit 0
export SLURM_CONF=$S/slurm.conf
t0=$EPOCHREALTIME

log() { echo "stop.sh: $*" >&2; }

# the two-node network (STATE/net, written by start.sh): namespaces (their veths, and the bridge in the switch's,
# go with them), this host's link to the switch, the hosts files
net_down() {
  [[ -s "$S/net" ]] || return 0
  local kind name
  while read -r kind name; do
    case "$kind" in
      netns) ip netns pids "$name" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
             ip netns del "$name" 2>/dev/null ;;
      link) ip link del "$name" 2>/dev/null ;;
      etc) [[ "$name" == /etc/netns/lb* ]] && rm -rf "$name" ;;
    esac
  done < <(tac "$S/net")
  rm -f "$S/net"
}
if ((NET_ONLY)); then net_down; exit 0; fi

if [[ "${_SLURM_TESTCLUSTER_LOCKED:-}" != "$S" ]]; then
  exec 9>>"$S/.lock"
  flock -w 600 9 || { log "could not lock $S/.lock"; exit 1; }
fi

# A PID is ours when its environment carries our SLURM_CONF (guards against PID reuse).
# (No `| grep -q` anywhere: with pipefail, grep quitting early can fail the pipeline.)
ours() {
  local env
  [[ "$1" =~ ^[0-9]+$ ]] && env=$(tr '\0' '\n' 2>/dev/null <"/proc/$1/environ") || return 1
  [[ $'\n'"$env"$'\n' == *$'\n'"SLURM_CONF=$SLURM_CONF"$'\n'* ]]
}
pid_of() { cat "$S/pids/$1" 2>/dev/null; }

zombie() {
  local st
  st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  st=${st##*) }  # the state follows "(comm) "
  [[ "${st%% *}" == Z ]]
}

# stop PID [GRACE_TENTHS]: TERM, wait, KILL
stop_pid() {
  local pid=$1 n=${2:-150}
  ours "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq "$n"); do ours "$pid" || break; sleep 0.1; done
  if ours "$pid"; then
    log "pid $pid did not stop on TERM: KILL"
    kill -KILL "$pid" 2>/dev/null
    for _ in $(seq 50); do ours "$pid" || break; sleep 0.1; done
  fi
  ZOMBIES+=("$pid")
}
ZOMBIES=()

# 1. the watchdog (a bash loop in its own process group), unless it is the one running us
w=$(pid_of watchdog)
if [[ -n "$w" && "$w" != "$$" ]] && ours "$w"; then
  kill -TERM -- "-$w" 2>/dev/null
fi
rm -f "$S/pids/watchdog"

# 2. cancel what is left in the queue, and let slurmd clean the steps up (bounded)
if ours "$(pid_of slurmctld)"; then
  jobs=$(timeout 10 squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ')
  if [[ -n "${jobs// /}" ]]; then
    log "cancelling jobs: $jobs"
    # shellcheck disable=SC2086
    timeout 10 scancel $jobs 2>/dev/null
    for _ in $(seq 150); do
      [[ -z "$(timeout 5 squeue -h -o %A 2>/dev/null)" ]] && break
      sleep 0.1
    done
  fi
fi

# 3. the daemons, clients before servers
for d in "$S"/pids/slurmd* slurmctld slurmdbd mariadb munged; do
  d=${d##*/}
  pid=$(pid_of "$d") || continue
  stop_pid "$pid"
  rm -f "$S/pids/$d"
done

# 4. anything of this cluster still alive: slurmstepd or job processes (SLURM_JOB_ID set)
left=()
for e in /proc/[0-9]*/environ; do
  pid=${e#/proc/}; pid=${pid%/environ}
  [[ "$pid" == "$$" ]] && continue
  env=$(tr '\0' '\n' 2>/dev/null <"$e") || continue
  grep -qxF "SLURM_CONF=$SLURM_CONF" <<<"$env" || continue
  comm=$(cat "/proc/$pid/comm" 2>/dev/null) || continue
  if [[ "$comm" == slurmstepd || $'\n'"$env" == *$'\n'SLURM_JOB_ID=* ]]; then
    left+=("$pid")
  fi
done
if ((${#left[@]})); then
  log "killing leftover job processes: ${left[*]}"
  kill -KILL "${left[@]}" 2>/dev/null
fi
rm -f "$S"/pids/*
net_down

# 5. the (now empty) cgroup v1 folders of our nodes; the node names are unique to this state folder
while read -r node; do
  [[ -n "$node" ]] || continue
  for d in /sys/fs/cgroup/*/"slurm_$node"; do
    [[ -d "$d" ]] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
  done
done < <(cat "$S/node" 2>/dev/null)
# Our daemons were orphaned when start.sh exited; their new parent (init or a subreaper) reaps
# them, some init processes only every second or two: wait so that `pgrep` is clean, 3 s in all.
# A subreaper that reaps only its own (a test process that also runs cells) leaves them to its
# own teardown: they are dead already, and waiting on each would only add up.
waits=30
for pid in "${ZOMBIES[@]}"; do
  while ((waits > 0)) && zombie "$pid"; do sleep 0.1; waits=$((waits - 1)); done
done
log "stopped in $(awk "BEGIN { printf \"%.1f\", $EPOCHREALTIME - $t0 }")s ($S)"
