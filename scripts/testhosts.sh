#!/usr/bin/env bash
# Test hosts on one machine: N network namespaces (worker-0 .. worker-N-1) joined by veth pairs to a
# bridge, each with its own address in 10.231.0.0/24 and hostname, so that an Open MPI job started
# with the printed hostfile and rsh agent crosses real TCP links between "hosts" (docs/multihost.md).
#
#   scripts/testhosts.sh up N      # create (root); prints the hostfile and mpirun options to use
#   scripts/testhosts.sh down      # remove everything `up` made
#   scripts/testhosts.sh check     # exit 0 when this machine allows it (root, ip netns), else say why
#   scripts/testhosts.sh agent HOST CMD...   # Open MPI's plm_rsh_agent: run CMD "on" HOST
#
# The launcher side sits on the bridge as 10.231.0.1 (ds-launcher); worker-i is 10.231.0.(10+i).
# Names resolve through /etc/hosts (a marked block, removed by `down`) and, inside each namespace,
# /etc/netns/<host>/hosts. State (hostfile, mpirun options) goes to $DS_TESTHOSTS_DIR (/tmp/ds_testhosts).
set -euo pipefail

SELF=$(readlink -f "$0")
STATE=${DS_TESTHOSTS_DIR:-/tmp/ds_testhosts}
BRIDGE=dsbr0
NET=10.231.0
MARK_BEGIN="# ds-testhosts begin"
MARK_END="# ds-testhosts end"

die() { echo "testhosts: $*" >&2; exit 1; }

check() {
  [ "$(id -u)" = 0 ] || { echo "testhosts: needs root (network namespaces)"; return 1; }
  command -v ip >/dev/null || { echo "testhosts: needs iproute2 (ip)"; return 1; }
  ip netns add ds-probe 2>/dev/null || { echo "testhosts: this machine does not allow network namespaces"; return 1; }
  ip netns del ds-probe
}

hosts_block() {
  local n=$1 i
  echo "$MARK_BEGIN"
  echo "$NET.1 ds-launcher"
  for ((i = 0; i < n; i++)); do echo "$NET.$((10 + i)) worker-$i"; done
  echo "$MARK_END"
}

remove_hosts_block() {
  [ -f /etc/hosts ] || return 0
  if grep -q "$MARK_BEGIN" /etc/hosts; then
    # /etc/hosts may be a bind mount (containers): rewrite it in place, never replace the file.
    local kept
    kept=$(sed "/$MARK_BEGIN/,/$MARK_END/d" /etc/hosts)
    printf '%s\n' "$kept" > /etc/hosts
  fi
}

down() {
  local ns link
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^worker-' || true); do
    # A process left inside keeps the namespace (and its veth) alive after `ip netns del`.
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "/etc/netns/$ns"
  done
  for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep '^dsv[0-9]*$' || true); do
    ip link del "$link" 2>/dev/null || true
  done
  ip link del "$BRIDGE" 2>/dev/null || true
  remove_hosts_block
  rm -rf "$STATE"
}

up() {
  local n=${1:-2} i
  [[ "$n" =~ ^[0-9]+$ ]] && ((n >= 1 && n <= 64)) || die "up N: N must be 1..64, got '$n'"
  check >/dev/null || die "$(check || true)"
  down
  ip link add "$BRIDGE" type bridge
  ip addr add "$NET.1/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  for ((i = 0; i < n; i++)); do
    local host=worker-$i veth=dsv$i
    ip netns add "$host"
    ip link add "$veth" type veth peer name eth0 netns "$host"
    ip link set "$veth" master "$BRIDGE" up
    ip -n "$host" addr add "$NET.$((10 + i))/24" dev eth0
    ip -n "$host" link set eth0 up
    ip -n "$host" link set lo up
    mkdir -p "/etc/netns/$host"
    { echo "127.0.0.1 localhost $host"; hosts_block "$n"; } > "/etc/netns/$host/hosts"
  done
  remove_hosts_block
  hosts_block "$n" >> /etc/hosts
  mkdir -p "$STATE"
  : > "$STATE/hostfile"
  for ((i = 0; i < n; i++)); do echo "worker-$i slots=1" >> "$STATE/hostfile"; done
  # Open MPI's agent list splits on ':' — the agent is a script of its own. The hosts share this
  # machine's cores: each rank gets its share of them (OMP_NUM_THREADS), as on a real host of its own
  # it would get the host's, instead of every rank spinning a full pool on the same cores.
  local threads=$(( $(nproc) / n ))
  ((threads >= 1)) || threads=1
  printf '#!/bin/sh\nexport OMP_NUM_THREADS=%s\nexec %s agent "$@"\n' "$threads" "$SELF" > "$STATE/agent"
  chmod +x "$STATE/agent"
  # Open MPI: start daemons through the agent, talk TCP over the bridge only, never shared memory.
  cat > "$STATE/mpirun_options" <<OPTS
--mca plm_rsh_agent $STATE/agent --mca plm_rsh_no_tree_spawn 1 --bind-to none --mca pml ob1 --mca oob_tcp_if_include $NET.0/24 --mca btl tcp,self --mca btl_tcp_if_include $NET.0/24
OPTS
  echo "testhosts: $n hosts up (worker-0 .. worker-$((n - 1)) on $NET.0/24)"
  echo "  hostfile:        $STATE/hostfile"
  echo "  mpirun options:  $(cat "$STATE/mpirun_options")"
}

agent() {
  # Open MPI calls: <agent> [rsh args] <host> <command...>; the host is the first non-option word.
  while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done
  local host=${1:?agent: no host}
  shift
  [ -e "/run/netns/$host" ] || die "agent: no test host '$host' (scripts/testhosts.sh up N)"
  # A host whose link is cut cannot be reached, as ssh could not reach it: exit 255 like ssh does.
  local link=/sys/class/net/dsv${host#worker-}/operstate
  if [ -r "$link" ] && [ "$(cat "$link")" = down ]; then
    echo "ssh: connect to host $host port 22: No route to host (testhosts: its link dsv${host#worker-} is down)" >&2
    exit 255
  fi
  # Its own UTS namespace, so the processes there see the host's name as theirs.
  exec ip netns exec "$host" unshare --uts /bin/sh -c "hostname $host && exec $*"
}

case "${1:-}" in
  up) up "${2:-2}" ;;
  down) down ;;
  check) check ;;
  agent) shift; agent "$@" ;;
  *) die "usage: $0 up N | down | check | agent HOST CMD..." ;;
esac
