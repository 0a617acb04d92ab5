#!/usr/bin/env bash
# Start a private single-node Slurm cluster on this machine (idempotent).
#
#   slurm/testcluster/start.sh [STATE_DIR]      # default: $SLURM_TESTCLUSTER_STATE or ./state
#   export SLURM_CONF=STATE_DIR/slurm.conf      # printed at the end and written to STATE_DIR/env
#   slurm/testcluster/stop.sh [STATE_DIR]
#
# Everything lives in STATE_DIR: slurm.conf, cgroup.conf, slurmdbd.conf, a munge key and
# socket, MariaDB's data, spool/state folders, logs (log/), the PIDs of the daemons we started
# (pids/). Ports are picked free at first start (ports), so a system Slurm, munge or MySQL
# is not disturbed. Needs root (job launch, cgroups); run install.sh first.
#
# Environment (all optional):
#   SLURM_TESTCLUSTER_STATE       state folder when no argument is given
#   SLURM_TESTCLUSTER_MODE        auto (default) | cgroup | linuxproc
#   SLURM_TESTCLUSTER_ACCOUNTING  auto (default: on if slurmdbd and mariadbd are installed) | 1 | 0
#   SLURM_TESTCLUSTER_PARTITION   partition name (default: debug)
#   SLURM_TESTCLUSTER_WAIT        seconds to wait for each daemon (default: 60)
#   SLURM_TESTCLUSTER_OWNER_PID   when set, a watchdog runs stop.sh once that process is gone
#                                 (so a killed test run leaves no daemons behind)
#   SLURM_TESTCLUSTER_NODES       1 (default) | 2: two nodes, each slurmd in its own network namespace
#                                 (own address on a private switch, own host name, one CPU of its own);
#                                 torn down by stop.sh. Needs root and ip(8). This host's firewall
#                                 cannot cut them apart (see "two nodes" below).
set -euo pipefail
t0=$EPOCHREALTIME
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
S=${1:-${SLURM_TESTCLUSTER_STATE:-$here/state}}
mkdir -p "$S"
S=$(cd "$S" && pwd -P)
MODE_REQ=${SLURM_TESTCLUSTER_MODE:-auto}
ACCT_REQ=${SLURM_TESTCLUSTER_ACCOUNTING:-auto}
PARTITION=${SLURM_TESTCLUSTER_PARTITION:-debug}
WAIT=${SLURM_TESTCLUSTER_WAIT:-60}
NODES=${SLURM_TESTCLUSTER_NODES:-1}
OWNER=${SLURM_TESTCLUSTER_OWNER_PID:-}
ME=$(id -un)
case "$MODE_REQ" in
  auto|cgroup|linuxproc) ;;
  *) echo "start.sh: SLURM_TESTCLUSTER_MODE must be auto, cgroup or linuxproc" >&2; exit 2 ;;
esac
case "$NODES" in
  1) ;;
  2) [[ "$MODE_REQ" == cgroup ]] && { echo "start.sh: two nodes run in linuxproc mode only" >&2; exit 2; }
     MODE_REQ=linuxproc ;;
  *) echo "start.sh: SLURM_TESTCLUSTER_NODES must be 1 or 2" >&2; exit 2 ;;
esac
export SLURM_CONF=$S/slurm.conf   # every daemon and client below, and the marker stop.sh checks

log() { echo "start.sh: $*" >&2; }
# phase NAME: seconds since start, appended to log/start.timing (where the time goes)
phase() { awk "BEGIN { printf \"%6.2f %s\\n\", $EPOCHREALTIME - $t0, \"$1\" }" >>"$S/log/start.timing"; }

# one start/stop at a time per state folder (stop.sh skips the lock when we hold it)
if [[ "${_SLURM_TESTCLUSTER_LOCKED:-}" != "$S" ]]; then
  exec 9>>"$S/.lock"
  flock -w 600 9 || { log "could not lock $S/.lock"; exit 1; }
  export _SLURM_TESTCLUSTER_LOCKED=$S
fi

# A PID is ours when its environment carries our SLURM_CONF (guards against PID reuse).
# (No `| grep -q` anywhere: with pipefail, grep quitting early can fail the pipeline.)
ours() {
  local env
  [[ "$1" =~ ^[0-9]+$ ]] && env=$(tr '\0' '\n' 2>/dev/null <"/proc/$1/environ") || return 1
  [[ $'\n'"$env"$'\n' == *$'\n'"SLURM_CONF=$SLURM_CONF"$'\n'* ]]
}

# A child we launched is running (not exited, not a zombie). Right after the fork it may still
# be our own subshell (whose environment lacks SLURM_CONF), so `ours` would be premature there.
running() {
  local st
  [[ "$1" =~ ^[0-9]+$ ]] && st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  st=${st##*) }  # the state follows "(comm) "
  [[ "${st%% *}" != Z ]]
}

print_env() {
  echo "export SLURM_CONF=$SLURM_CONF" >"$S/env"
  cat "$S/env"
}

# ---- already running? -------------------------------------------------------------------
# every node of the cluster (one per line in STATE/node) up
nodes_up() {
  local want states
  want=$(paste -sd, "$S/node" 2>/dev/null) && [[ -n "$want" ]] || return 1
  states=$(timeout 10 sinfo -h -N -n "$want" -o %T 2>/dev/null) || return 1
  (($(wc -l <<<"$states") == $(wc -l <"$S/node"))) || return 1
  ! grep -Evq '^(idle|mixed|allocated|completing)$' <<<"$states"
}
if compgen -G "$S/pids/*" >/dev/null; then
  alive=1
  for f in "$S"/pids/*; do ours "$(cat "$f" 2>/dev/null)" || alive=0; done
  if ((alive)) && [[ -e "$S/pids/slurmctld" ]] && compgen -G "$S/pids/slurmd*" >/dev/null &&
     [[ "$(cat "$S/nodes" 2>/dev/null || echo 1)" == "$NODES" ]] && nodes_up; then
    # a node cut off since it started: check.sh says what blocks it
    if [[ -s "$S/addr" ]] && ! "$here/check.sh" "$S"; then exit 1; fi
    log "already running ($(cat "$S/mode"), accounting $(cat "$S/accounting")): nothing to do"
    print_env
    exit 0
  fi
  log "stale or partial cluster in $S: stopping it first"
  "$here/stop.sh" "$S" >&2
fi

# ---- what to run --------------------------------------------------------------------------
for b in slurmctld slurmd munged sinfo srun; do
  command -v "$b" >/dev/null || { log "$b not found: run $here/install.sh"; exit 1; }
done
if [[ "$(id -u)" != 0 ]]; then
  log "warning: not root; jobs can only run as $ME and cgroup mode is unavailable"
fi
case "$ACCT_REQ" in
  0|no|false) ACCT=0 ;;
  auto) ACCT=0; command -v slurmdbd >/dev/null && command -v mariadbd >/dev/null &&
          command -v mariadb >/dev/null && ACCT=1 ;;
  *) ACCT=1
     for b in slurmdbd mariadbd mariadb sacctmgr; do
       command -v "$b" >/dev/null || { log "$b not found: run $here/install.sh"; exit 1; }
     done ;;
esac

mkdir -p "$S"/{pids,run,log,ctld,spool,munge}
echo "---- start.sh $(date -Is)" >>"$S/log/start.timing"
chmod 755 "$S/munge"  # munged wants the socket folder searchable by all
if ((${#S} > 80)); then
  log "state path too long for unix sockets (${#S} > 80 chars): $S"; exit 1
fi

# ports: reuse the recorded ones when still free, otherwise pick 3 free consecutive ports
port_free() { ! (: </dev/tcp/127.0.0.1/"$1") 2>/dev/null; }
ports_free() { local p; for p in "$@"; do port_free "$p" || return 1; done; }
P=()
[[ -s "$S/ports" ]] && read -r -a P <"$S/ports"
if ((${#P[@]} != 3)) || ! ports_free "${P[@]}"; then
  P=()
  for _ in $(seq 50); do
    b=$((20000 + RANDOM % 12000))
    # (and no namespace of another test cluster named after that slurmd port: one started in another network
    # namespace sees other ports free)
    if ports_free $b $((b + 1)) $((b + 2)) && ! compgen -G "/run/netns/lbtc$((b + 1))*" >/dev/null; then
      P=($b $((b + 1)) $((b + 2))); break
    fi
  done
  ((${#P[@]} == 3)) || { log "no free ports found"; exit 1; }
  echo "${P[*]}" >"$S/ports"
fi
P_CTLD=${P[0]} P_SLURMD=${P[1]} P_DBD=${P[2]}
# The node name is unique per cluster: slurmd's cgroups live under /sys/fs/cgroup/*/slurm_<node>,
# so two test clusters on one machine (parallel CI jobs, a developer's second checkout) never
# share a job cgroup.
NODE=tc$P_SLURMD
if ((NODES == 1)); then
  NODE_LIST=("$NODE")
else
  NODE_LIST=("${NODE}a" "${NODE}b")
fi
printf '%s\n' "${NODE_LIST[@]}" >"$S/node"
if ((NODES == 1)); then echo "$NODE 127.0.0.1 -" >"$S/addr"; fi
echo "$NODES" >"$S/nodes"

# node shape from slurmd -C (first line: NodeName=... CPUs=2 Boards=1 ... RealMemory=24105)
declare -A HW=()
for kv in $(slurmd -C | head -n1); do HW[${kv%%=*}]=${kv#*=}; done
for k in CPUs Boards SocketsPerBoard CoresPerSocket ThreadsPerCore RealMemory; do
  [[ -n "${HW[$k]:-}" ]] || { log "slurmd -C did not report $k"; slurmd -C >&2; exit 1; }
done
MEM=$((HW[RealMemory] * 95 / 100))

# ---- two nodes: a private switch, one network namespace per node ---------------------------
# The nodes' bridge lives in a network namespace of its own, `lbtc<port>s` (the switch), not in this host's: frames
# between the nodes are bridged there, where no firewall rule exists, and never pass this host's netfilter. So a
# FORWARD policy of DROP on this host (a Docker daemon sets one when it starts) cannot cut the nodes apart. This
# host joins the switch through a veth pair, `lbtc<port>h` with 10.234.N.1/24 (slurmctld listens there): its
# traffic with the nodes is its own (INPUT, OUTPUT), never forwarded. Node i: 10.234.N.(11+i) in its namespace
# `lbtc<port><a|b>`, with /etc/netns/<ns>/hosts naming every node (ip netns exec mounts it over /etc/hosts, for
# srun and torch.distributed inside jobs). Nothing is routed out. STATE/net lists what stop.sh removes;
# STATE/addr lists each node's name, address and namespace (check.sh reads it).
SUBNET=10.234.$((P_SLURMD % 250))
SWITCH=lbtc${P_SLURMD}s
BRIDGE=lbtcbr$P_SLURMD
HOSTLINK=lbtc${P_SLURMD}h
CTLD_ADDR=127.0.0.1
declare -A NODE_ADDR=() NODE_NS=() NODE_CPU=()
net_up() {
  command -v ip >/dev/null || { log "ip not found (iproute2): needed for two nodes"; exit 1; }
  [[ "$(id -u)" == 0 ]] || { log "two nodes need root (network namespaces)"; exit 1; }
  local i=0 n ns r c cpus=()
  for r in $(taskset -pc $$ | sed 's/.*: //; s/,/ /g'); do  # the CPUs we may use, ranges expanded
    if [[ "$r" == *-* ]]; then for ((c = ${r%-*}; c <= ${r#*-}; c++)); do cpus+=("$c"); done; else cpus+=("$r"); fi
  done
  # left by a start that lost its STATE/net (the bridge in this namespace: an older start.sh put it there)
  ip netns del "$SWITCH" 2>/dev/null || true
  ip link del "$HOSTLINK" 2>/dev/null || true
  ip link del "$BRIDGE" 2>/dev/null || true
  ip netns add "$SWITCH"
  echo "netns $SWITCH" >>"$S/net"
  ip -n "$SWITCH" link set lo up
  ip -n "$SWITCH" link add "$BRIDGE" type bridge
  ip -n "$SWITCH" link set "$BRIDGE" up
  ip link add "$HOSTLINK" type veth peer name up0 netns "$SWITCH"
  echo "link $HOSTLINK" >>"$S/net"
  ip -n "$SWITCH" link set up0 master "$BRIDGE" up
  ip addr add "$SUBNET.1/24" dev "$HOSTLINK"
  ip link set "$HOSTLINK" up
  : >"$S/addr"
  for n in "${NODE_LIST[@]}"; do
    ns=lb$n
    NODE_NS[$n]=$ns NODE_ADDR[$n]=$SUBNET.$((11 + i)) NODE_CPU[$n]=${cpus[$((i % ${#cpus[@]}))]}
    ip netns del "$ns" 2>/dev/null || true
    ip netns add "$ns"
    echo "netns $ns" >>"$S/net"
    mkdir -p "/etc/netns/$ns"
    echo "etc /etc/netns/$ns" >>"$S/net"
    ip link add "v$n" type veth peer name eth0 netns "$ns"
    ip link set "v$n" netns "$SWITCH"
    ip -n "$SWITCH" link set "v$n" master "$BRIDGE" up
    ip -n "$ns" addr add "${NODE_ADDR[$n]}/24" dev eth0
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 up
    echo "$n ${NODE_ADDR[$n]} $ns" >>"$S/addr"
    i=$((i + 1))
  done
  for n in "${NODE_LIST[@]}"; do
    { echo "127.0.0.1 localhost"; echo "$SUBNET.1 $(uname -n)"
      for m in "${NODE_LIST[@]}"; do echo "${NODE_ADDR[$m]} $m"; done; } >"/etc/netns/${NODE_NS[$n]}/hosts"
  done
  CTLD_ADDR=$SUBNET.1
}
if ((NODES > 1)); then
  "$here/stop.sh" --net-only "$S" >&2  # what an earlier, interrupted start left
  net_up
  phase "network: bridge and namespaces"
fi

# ---- helpers --------------------------------------------------------------------------------
# launch NAME CMD...: run CMD in the foreground of its own session, in the background of ours;
# $! is then the daemon itself (setsid does not fork when the caller is no group leader).
launch() {
  local name=$1; shift
  # fd 9 (our lock) must not leak into daemons, nor the lock marker into their environment
  setsid env -u _SLURM_TESTCLUSTER_LOCKED "$@" </dev/null >>"$S/log/$name.out" 2>&1 9>&- &
  echo $! >"$S/pids/$name"
}

fail() {
  log "$*"
  local f
  for f in "$S"/log/*; do
    [[ -s "$f" ]] || continue
    echo "----- tail of $f" >&2
    tail -n 25 "$f" >&2
  done
  "$here/stop.sh" "$S" >&2 || true
  exit 1
}

# wait_for NAME DESCRIPTION CMD...: poll CMD (every 0.1 s) until it succeeds, for $WAIT s at most
wait_for() {
  local name=$1 what=$2; shift 2
  local deadline=$((SECONDS + WAIT))
  until "$@" >/dev/null 2>&1; do
    if [[ -n "$name" ]] && ! running "$(cat "$S/pids/$name")"; then
      fail "$name exited while waiting for $what"
    fi
    ((SECONDS < deadline)) || fail "timed out after ${WAIT}s waiting for $what"
    sleep 0.1
  done
}

# ---- munge (own key and socket) ------------------------------------------------------------
SOCK=$S/munge/munge.socket
if [[ ! -s "$S/munge/munge.key" ]]; then
  (umask 077; head -c 1024 /dev/urandom >"$S/munge/munge.key")
fi
chmod 600 "$S/munge/munge.key"
rm -f "$SOCK" "$SOCK.lock"
launch munged munged --foreground --force --socket="$SOCK" --key-file="$S/munge/munge.key" \
  --pid-file="$S/run/munged.pid" --log-file="$S/log/munged.log" --seed-file="$S/munge/munged.seed"
munge_ok() { munge -n -S "$SOCK" | unmunge -S "$SOCK"; }
wait_for munged "munged" munge_ok
phase munged

# ---- accounting: MariaDB + slurmdbd --------------------------------------------------------
# MariaDB runs without networking and without grant tables, reachable only through a socket in
# a root-only folder: no system tables to create (mariadb-install-db costs ~6 s), no password.
# slurmdbd finds that socket through MYSQL_UNIX_PORT (StorageHost=localhost means "socket").
ACCT_CONF="AccountingStorageType=accounting_storage/none"
if ((ACCT)); then
  D=$S/mysql
  mkdir -p "$D/data" "$D/tmp"
  chmod 700 "$D"
  SQL_USER=(); [[ "$(id -u)" == 0 ]] && SQL_USER=(--user=root)
  rm -f "$D/mysql.sock"
  launch mariadb mariadbd --no-defaults "${SQL_USER[@]}" --datadir="$D/data" --tmpdir="$D/tmp" \
    --socket="$D/mysql.sock" --skip-networking --skip-grant-tables \
    --pid-file="$S/run/mariadb.pid" --log-error="$S/log/mariadb.log" --performance-schema=OFF \
    --innodb-buffer-pool-size=128M --innodb-lock-wait-timeout=900 --max-connections=64
  wait_for mariadb "MariaDB" mariadb --no-defaults --socket="$D/mysql.sock" -e 'SELECT 1'
  phase mariadb
  (umask 077; cat >"$S/slurmdbd.conf" <<EOF
# written by slurm/testcluster/start.sh
AuthType=auth/munge
AuthInfo=socket=$SOCK
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$P_DBD
SlurmUser=$ME
PidFile=$S/run/slurmdbd.pid
LogFile=$S/log/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=$ME
StorageLoc=slurm_acct_db
EOF
  )
  ACCT_CONF="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$P_DBD
# with a non-default munge socket, slurmctld and the clients find it here for slurmdbd
AccountingStoragePass=$SOCK"
fi

# two nodes: per-node spool, pid and log files (%n: the node's name); each node one CPU and half the memory,
# its CPU bound by its slurmd's own affinity (task/none: Slurm binds nothing further); a lost node is
# noticed within 10 s
SUFFIX="" SLURMD_TIMEOUT=60
NODE_CONF="NodeName=$NODE NodeAddr=127.0.0.1 CPUs=${HW[CPUs]} Boards=${HW[Boards]} SocketsPerBoard=${HW[SocketsPerBoard]} CoresPerSocket=${HW[CoresPerSocket]} ThreadsPerCore=${HW[ThreadsPerCore]} RealMemory=$MEM State=UNKNOWN"
if ((NODES > 1)); then
  # a lost node's jobs end (NODE_FAIL) rather than wait out the 2 minutes before a requeued job may start
  SUFFIX=-%n SLURMD_TIMEOUT=10 NODE_CONF="SlurmdParameters=config_overrides"$'\n'"JobRequeue=0"
  for n in "${NODE_LIST[@]}"; do
    NODE_CONF+=$'\n'"NodeName=$n NodeHostname=$n NodeAddr=${NODE_ADDR[$n]} CPUs=1 Boards=1 SocketsPerBoard=1 CoresPerSocket=1 ThreadsPerCore=1 RealMemory=$((MEM / NODES)) State=UNKNOWN"
  done
fi

write_conf() { # write_conf MODE
  local mode=$1 proctrack taskplugin gather
  if [[ "$mode" == cgroup ]]; then
    proctrack=proctrack/cgroup taskplugin=task/cgroup,task/affinity gather=jobacct_gather/cgroup
  else
    proctrack=proctrack/linuxproc taskplugin=task/affinity gather=jobacct_gather/linux
  fi
  ((NODES == 1)) || taskplugin=task/none
  cat >"$S/slurm.conf" <<EOF
# written by slurm/testcluster/start.sh for $(uname -n) ($mode mode, $NODES node(s))
ClusterName=loaderbench
SlurmctldHost=localhost($CTLD_ADDR)
SlurmctldPort=$P_CTLD
SlurmdPort=$P_SLURMD
SlurmUser=$ME
AuthType=auth/munge
AuthInfo=socket=$SOCK
CredType=cred/munge
StateSaveLocation=$S/ctld
SlurmdSpoolDir=$S/spool$SUFFIX
SlurmctldPidFile=$S/run/slurmctld.pid
SlurmdPidFile=$S/run/slurmd$SUFFIX.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd$SUFFIX.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=$proctrack
TaskPlugin=$taskplugin
JobAcctGatherType=$gather
JobAcctGatherFrequency=10
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1024
SchedulerType=sched/backfill
MpiDefault=none
MailProg=/bin/true
SwitchType=switch/none
ReturnToService=2
# finished jobs stay visible in squeue -t all / scontrol for an hour
MinJobAge=3600
KillWait=2
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=$SLURMD_TIMEOUT
$ACCT_CONF
JobCompType=jobcomp/none
$NODE_CONF
PartitionName=$PARTITION Nodes=$(IFS=,; echo "${NODE_LIST[*]}") Default=YES MaxTime=INFINITE State=UP
EOF
  if [[ "$mode" == cgroup ]]; then
    cat >"$S/cgroup.conf" <<EOF
# written by slurm/testcluster/start.sh
CgroupPlugin=$CGROUP_PLUGIN
CgroupMountpoint=/sys/fs/cgroup
ConstrainCores=yes
ConstrainRAMSpace=yes
ConstrainSwapSpace=no
ConstrainDevices=no
EOF
  else
    rm -f "$S/cgroup.conf"
  fi
}

# ---- mode: cgroup (enforced binding and memory) when this machine allows it ----------------
cgroup_possible() {
  [[ "$(id -u)" == 0 ]] || { WHY="not root"; return 1; }
  local mounts
  mounts=$(mount -t cgroup 2>/dev/null || true)
  if [[ "$mounts" == *" /sys/fs/cgroup/cpuset "* && "$mounts" == *" /sys/fs/cgroup/memory "* &&
        "$mounts" == *" /sys/fs/cgroup/freezer "* ]]; then
    local t=/sys/fs/cgroup/cpuset/.slurm-testcluster-probe.$$
    mkdir "$t" 2>/dev/null && rmdir "$t" || { WHY="cgroup v1 is read-only"; return 1; }
    CGROUP_PLUGIN=cgroup/v1; return 0
  fi
  if [[ -r /sys/fs/cgroup/cgroup.controllers ]] &&
     grep -qw cpuset /sys/fs/cgroup/cgroup.controllers &&
     grep -qw memory /sys/fs/cgroup/cgroup.controllers; then
    CGROUP_PLUGIN=cgroup/v2; return 0   # not tried on our machines; the smoke test decides
  fi
  WHY="no cgroup v1 cpuset/memory/freezer mounts and no usable cgroup v2"
  return 1
}

start_slurm() { # start_slurm MODE -> 0 when the node is idle and a step runs
  local mode=$1
  write_conf "$mode"
  echo "$mode" >"$S/mode"
  launch slurmctld slurmctld -D -i -f "$S/slurm.conf"
  local n d
  if ((NODES == 1)); then
    launch slurmd slurmd -D -N "$NODE" -f "$S/slurm.conf"
  else  # each in its network namespace (not `ip netns exec`, whose fresh /sys has no cgroup mounts), under its
    # own host name, with the hosts file naming the nodes, on its own CPU
    for n in "${NODE_LIST[@]}"; do
      mkdir -p "$S/spool-$n"
      launch "slurmd-$n" nsenter --net="/run/netns/${NODE_NS[$n]}" unshare --uts --mount --propagation private \
        sh -c 'mount --bind "$4" /etc/hosts && hostname "$1" && exec taskset -c "$2" slurmd -D -N "$1" -f "$3"' \
        sh "$n" "${NODE_CPU[$n]}" "$S/slurm.conf" "/etc/netns/${NODE_NS[$n]}/hosts"
    done
  fi
  local deadline=$((SECONDS + WAIT)) st=""
  while :; do
    nodes_up && break
    st=$(timeout 10 sinfo -h -N -o '%N %T' 2>/dev/null | paste -sd, || true)
    for d in "$S"/pids/slurmctld "$S"/pids/slurmd*; do
      running "$(cat "$d")" || { WHY="${d##*/} exited"; return 1; }
    done
    ((SECONDS < deadline)) || { WHY="node state '${st:-no answer}' after ${WAIT}s, not idle"; return 1; }
    sleep 0.1
  done
  phase "$mode: node idle"
  # before anything is submitted: every node answers on slurmd's port, from here and from each other node; if one
  # does not, check.sh says in one sentence what blocks it, and nothing is left running
  "$here/check.sh" "$S" || { "$here/stop.sh" "$S" >&2; exit 1; }
  phase "$mode: nodes reachable"
  # a real step through slurmstepd: catches cgroup setup errors that only show at launch
  if ! out=$(timeout 60 srun -N"$NODES" -n"$NODES" -c1 --mem=64 -t 1 -J smoke true 2>&1); then
    WHY="smoke test 'srun true' failed: $out"; return 1
  fi
  phase "$mode: smoke test"
}

stop_slurm() {
  local d pid
  for d in "$S"/pids/slurmd* "$S"/pids/slurmctld; do
    d=${d##*/}
    pid=$(cat "$S/pids/$d" 2>/dev/null) || continue
    ours "$pid" && kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 100); do ours "$pid" || break; sleep 0.1; done
    ours "$pid" && kill -KILL "$pid" 2>/dev/null
    rm -f "$S/pids/$d"
  done
}

MODE=""
WHY=""
CGROUP_PLUGIN=""
# first guess of the mode, so clients (sacctmgr) have a slurm.conf right away
FIRST=linuxproc
if [[ "$MODE_REQ" != linuxproc ]] && cgroup_possible; then FIRST=cgroup; fi
write_conf "$FIRST"

if ((ACCT)); then
  launch slurmdbd env MYSQL_UNIX_PORT="$D/mysql.sock" slurmdbd -D
  wait_for slurmdbd "slurmdbd" timeout 10 sacctmgr -n show cluster
  phase slurmdbd
  if [[ -z "$(timeout 10 sacctmgr -n -P show cluster format=cluster where cluster=loaderbench)" ]]; then
    timeout 10 sacctmgr -i add cluster loaderbench >>"$S/log/sacctmgr.log" 2>&1 ||
      fail "sacctmgr add cluster failed"
  fi
  phase "cluster registered"
fi

case "$MODE_REQ" in
  cgroup)
    cgroup_possible || fail "cgroup mode requested but not possible: $WHY"
    start_slurm cgroup || fail "cgroup mode failed: $WHY"
    MODE=cgroup ;;
  linuxproc) ;;
  auto)
    if cgroup_possible; then
      if start_slurm cgroup; then
        MODE=cgroup
      else
        log "cgroup mode ($CGROUP_PLUGIN) failed ($WHY); falling back to proctrack/linuxproc"
        stop_slurm
        mv -f "$S/log/slurmd.log" "$S/log/slurmd.cgroup-failed.log" 2>/dev/null || true
      fi
    else
      log "cgroup mode not possible ($WHY); using proctrack/linuxproc"
    fi ;;
esac
if [[ -z "$MODE" ]]; then
  start_slurm linuxproc || fail "Slurm did not come up: $WHY"
  MODE=linuxproc
fi
echo "$MODE" >"$S/mode"
echo "$ACCT" >"$S/accounting"
echo "$PARTITION" >"$S/partition"

# ---- watchdog: stop everything when the owner process (e.g. pytest) disappears -----------
if [[ -n "$OWNER" ]]; then
  launch watchdog bash -c '
    while [[ -e "$2/pids/slurmctld" ]]; do
      kill -0 "$1" 2>/dev/null || exec "$3" "$2"
      sleep 1
    done' watchdog "$OWNER" "$S" "$here/stop.sh"
fi

log "up in $(awk "BEGIN { printf \"%.1f\", $EPOCHREALTIME - $t0 }")s:" \
    "mode=$MODE accounting=$ACCT partition=$PARTITION nodes=$(paste -sd, "$S/node") state=$S"
print_env
