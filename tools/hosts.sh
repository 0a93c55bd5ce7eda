#!/usr/bin/env bash
# Two hosts on one machine, for running ranks across "machines" with OpenMPI's TCP transport:
# each host is a network namespace with its own hostname (UTS namespace), its own /tmp and
# /etc/hosts (mounted in a mount namespace made for each command run there), and the two are
# joined by a veth pair on 10.77.0.0/24. A host's /tmp is the machine's with the host's own
# changes over it (overlayfs): what was in /tmp before (a build there, say) both hosts see,
# and what a host writes there only that host does.
# Nothing leaves the namespaces: the pair is their only link. Needs root.
#
#   tools/hosts.sh up            make brigade-a (10.77.0.1) and brigade-b (10.77.0.2)
#   tools/hosts.sh down          remove them
#   tools/hosts.sh status        says whether they are up (exit 0) or not (exit 1)
#   tools/hosts.sh run HOST CMD  run the shell command CMD inside HOST, as ssh HOST CMD would
#   tools/hosts.sh mpirun ARGS   mpirun inside brigade-a, its ranks placed by a hostfile naming
#                                both hosts (ARGS as mpirun's: -np 2 --host brigade-a,brigade-b
#                                ...), remote daemons started by `hosts.sh run`, TCP only
set -euo pipefail
self=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
state=/run/brigade-hosts
hosts=(brigade-a brigade-b)
addr() { [ "$1" = brigade-a ] && echo 10.77.0.1 || echo 10.77.0.2; }

usage() { sed -n '2,16p' "$self" | sed 's/^# \{0,1\}//'; exit 2; }

is_up() {
  [ -e "$state/brigade-b.uts" ] && ip netns list 2>/dev/null | grep -q '^brigade-b\b'
}

up() {
  [ "$(id -u)" = 0 ] || { echo "hosts.sh: making namespaces needs root" >&2; exit 1; }
  is_up && return 0
  down 2>/dev/null || true
  mkdir -p "$state"
  # Namespaces are kept alive by bind mounts of their files here: a private mount, so the
  # binds do not propagate into the namespaces themselves.
  mount --bind "$state" "$state"
  mount --make-private "$state"
  printf '127.0.0.1 localhost\n10.77.0.1 brigade-a\n10.77.0.2 brigade-b\n' > "$state/hosts"
  ip link add bva type veth peer name bvb
  for h in "${hosts[@]}"; do
    ip netns add "$h"
    ip link set "bv${h#brigade-}" netns "$h"
    ip -n "$h" addr add "$(addr "$h")/24" dev "bv${h#brigade-}"
    ip -n "$h" link set lo up
    ip -n "$h" link set "bv${h#brigade-}" up
  done
  # The machine's /tmp, for the hosts' overlays to start from wherever a command comes from
  # (mpirun inside brigade-a starts brigade-b's daemon).
  mkdir -p "$state/machine-tmp"
  mount --bind /tmp "$state/machine-tmp"
  for h in "${hosts[@]}"; do
    mkdir -p "$state/$h/upper" "$state/$h/work"
    chmod 1777 "$state/$h/upper"
    touch "$state/$h.uts"
    nsenter --net="/run/netns/$h" unshare --uts="$state/$h.uts" hostname "$h"
  done
  # A command in each host, overlay and all, or no hosts: what cannot run here says so once.
  for h in "${hosts[@]}"; do
    if [ "$("$self" run "$h" hostname 2>&1)" != "$h" ]; then
      echo "hosts.sh: a command in $h does not run here: $("$self" run "$h" true 2>&1 | head -1)" >&2
      down
      exit 1
    fi
  done
}

down() {
  for h in "${hosts[@]}"; do
    umount "$state/$h.uts" 2>/dev/null || true
    ip netns del "$h" 2>/dev/null || true
  done
  umount "$state/machine-tmp" 2>/dev/null || true
  umount "$state" 2>/dev/null || true
  rm -rf "$state"
}

run() {
  local h=$1
  shift
  case "$h" in brigade-a|brigade-b|10.77.0.1|10.77.0.2) ;; *) echo "hosts.sh: no host '$h'" >&2; exit 255;; esac
  [ "$h" = 10.77.0.1 ] && h=brigade-a
  [ "$h" = 10.77.0.2 ] && h=brigade-b
  is_up || { echo "hosts.sh: the hosts are not up (tools/hosts.sh up)" >&2; exit 255; }
  # As ssh does: the arguments joined into one command for the host's shell, here in a mount
  # namespace of its own where the host's /tmp and /etc/hosts are in place. (A mount namespace
  # cannot be kept in a file that another one, brigade-a's, sees: one is made per command.)
  exec nsenter --net="/run/netns/$h" --uts="$state/$h.uts" -- unshare --mount --propagation private -- \
    sh -c 'mount -t overlay overlay -o "lowerdir=$1/machine-tmp,upperdir=$1/$2/upper,workdir=$1/$2/work" /tmp &&
           mount --bind "$1/hosts" /etc/hosts && exec sh -c "$3"' host "$state" "$h" "$*"
}

mpirun_across() {
  local root=()
  [ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
  run brigade-a "$(printf '%q ' mpirun "${root[@]}" --mca plm_rsh_agent "$self" --mca plm_rsh_args run \
    --mca btl tcp,self --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24 \
    --mca plm_rsh_no_tree_spawn 1 "$@")"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) is_up ;;
  run) shift; [ $# -ge 2 ] || usage; run "$@" ;;
  mpirun) shift; mpirun_across "$@" ;;
  # As OpenMPI's launch agent ("hosts.sh run HOST CMD" through plm_rsh_args).
  *) usage ;;
esac
