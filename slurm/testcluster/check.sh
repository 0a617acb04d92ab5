#!/usr/bin/env bash
# Check that every node of the test cluster in STATE_DIR answers on slurmd's port: from this host (where
# slurmctld, srun and sbatch run) and, with two nodes, from each node's network namespace to the other node (srun
# inside a job, torch.distributed). start.sh runs it before anything is submitted.
#
#   slurm/testcluster/check.sh [STATE_DIR]     # default: $SLURM_TESTCLUSTER_STATE or ./state
#
# Exit status 0 when every node answers; otherwise 1, with one sentence on stderr naming the node, where it was
# tried from and what blocks it. Reads STATE/addr (name, address, namespace per node) and STATE/ports.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
S=${1:-${SLURM_TESTCLUSTER_STATE:-$here/state}}
WAIT_S=${SLURM_TESTCLUSTER_CHECK_WAIT:-3}

[[ -s "$S/addr" && -s "$S/ports" ]] || { echo "check.sh: no cluster started in $S (no addr or ports file)" >&2; exit 1; }
read -r _ PORT _ <"$S/ports"

# try NS ADDR: a TCP connection to ADDR:PORT from namespace NS ("-": this host's); prints the error, if any
try() {
  local pre=()
  [[ "$1" != - ]] && pre=(nsenter --net="/run/netns/$1")
  timeout "$WAIT_S" "${pre[@]}" bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$2" "$PORT" 2>&1 >/dev/null
}

# what drops packets on this host: a DROP policy or DROP/REJECT rules in its iptables chains, or an nft ruleset
blocker() {
  local chain rules
  if command -v iptables >/dev/null; then
    for chain in "$@"; do
      rules=$(iptables -w 5 -S "$chain" 2>/dev/null) || continue
      if [[ $'\n'"$rules"$'\n' == *$'\n'"-P $chain DROP"$'\n'* ]]; then
        echo "this host's iptables $chain policy is DROP"; return
      fi
      if [[ "$rules" == *"-j DROP"* || "$rules" == *"-j REJECT"* ]]; then
        echo "this host's iptables $chain chain drops or rejects packets (iptables -S $chain)"; return
      fi
    done
  fi
  if command -v nft >/dev/null && [[ "$(nft list ruleset 2>/dev/null)" == *drop* ]]; then
    echo "this host's nftables ruleset drops packets (nft list ruleset)"; return
  fi
  echo "a firewall drops the packets, though this host's iptables shows no rule that would"
}

# why FROM ERROR CHAINS...: the reason, in words
why() {
  local from=$1 err=$2; shift 2
  case "$err" in
    *"Connection refused"*) echo "nothing listens there (its slurmd is not running: see $S/log/)" ;;
    *"No route to host"*|*"Network is unreachable"*)
      if [[ "$from" == - ]]; then echo "no route leads there from this host ($(blocker "$@"))"
      else echo "no route leads there from namespace $from"; fi ;;
    *) echo "no answer within ${WAIT_S} s: $(blocker "$@")" ;;
  esac
}

NAMES=() ADDRS=() NSS=()
while read -r name addr ns; do
  [[ -n "$name" ]] || continue
  NAMES+=("$name") ADDRS+=("$addr") NSS+=("$ns")
done <"$S/addr"

for i in "${!NAMES[@]}"; do
  # from this host: its own traffic (OUTPUT out, INPUT for the answer)
  if ! err=$(try - "${ADDRS[$i]}"); then
    echo "check.sh: node ${NAMES[$i]} (${ADDRS[$i]}) does not answer on slurmd's port $PORT from this host:" \
      "$(why - "$err" INPUT OUTPUT)." >&2
    exit 1
  fi
  # from every other node: bridged in the cluster's own switch namespace; FORWARD names the chain that would cut a
  # bridge in this host's namespace
  for j in "${!NAMES[@]}"; do
    [[ "$i" != "$j" && "${NSS[$j]}" != - ]] || continue
    if ! err=$(try "${NSS[$j]}" "${ADDRS[$i]}"); then
      echo "check.sh: node ${NAMES[$i]} (${ADDRS[$i]}) does not answer on slurmd's port $PORT from node" \
        "${NAMES[$j]}: $(why "${NSS[$j]}" "$err" FORWARD INPUT OUTPUT)." >&2
      exit 1
    fi
  done
done
