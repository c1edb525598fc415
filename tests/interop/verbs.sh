#!/usr/bin/env bash
# Interop of unmodified RDMA programs over librocelink_verbs.so with the same programs over
# the Linux kernel's RoCE (Soft-RoCE, rdma_rxe) in a Debian guest booted by
# ../shared/tools/rxe-vm: rdma-core's ibv_rc_pingpong and ibv_ud_pingpong, perftest's
# ib_write_bw, ib_read_lat, ib_send_bw, ib_atomic_bw and ib_atomic_lat — the library as
# server and as client. Not in CI
# (it boots QEMU); needs root and ~2 GB of disk, and the first run builds the guest image
# (a few minutes). Each run's two outputs go to $OUT/verbs-<program>-<library role>.{verbs,rxe}.log;
# with CAPTURE=1 the RoCE traffic of each run goes to .pcap and every ICRC is checked
# (`rocelink decode`).
#
# usage: tests/interop/verbs.sh [PROGRAM...]   (default: all seven)
#   LIB=/path/to/librocelink_verbs.so          a built library (no cargo build)
set -euo pipefail
cd "$(dirname "$0")/../.."
T=${RXEVM:-../shared/tools/rxe-vm/rxe-vm.sh}
OUT=${OUT:-target/interop}
NS=${RXEVM_NS:-rxevm}
HOST=10.77.0.1
GUEST=10.77.0.11
PROGRAMS=("$@")
[ ${#PROGRAMS[@]} -gt 0 ] || PROGRAMS=(ibv_rc_pingpong ibv_ud_pingpong ib_write_bw ib_read_lat ib_send_bw ib_atomic_bw ib_atomic_lat)
mkdir -p "$OUT"
if [ -z "${LIB:-}" ]; then
  cargo build --release -q
  LIB=$PWD/target/release/deps/librocelink_verbs.so
fi
BIN=$PWD/target/release/rocelink

[ -e /var/tmp/rxe-vm/img/rootfs.img ] || { bash "$T" deps; bash "$T" build; }
bash "$T" status 2>/dev/null | grep -q "vm1.*running" || bash "$T" start 1

# the library's device is GID index 0; the guest's IPv4 GID is index 1. The guest runs on
# an emulated CPU (TCG): modest counts.
opts() {  # $1 program, $2 side (verbs|rxe)
  local gid
  case $1 in
    ibv_*) [ "$2" = rxe ] && gid="-d rxe0 -g 1" || gid="-g 0"
           case $1 in *ud*) echo "$gid -n 200 -s 512" ;; *) echo "$gid -n 200" ;; esac ;;
    ib_*)  [ "$2" = rxe ] && gid="-d rxe0 -x 1" || gid=""
           echo "$gid -n 200 -F" ;;
  esac
}
verbs() {  # the program under the library, in the namespace, as device 10.77.0.1
  ip netns exec "$NS" env ROCELINK_VERBS=$HOST LD_PRELOAD="$LIB" timeout 120 "$@"
}

fail=0
run_pair() {  # $1 program, $2 the library's role (client|server)
  local p=$1 role=$2
  local base="$OUT/verbs-$p-$role"
  echo "== $p: the library as $role, rxe as the other"
  if [ "$role" = client ]; then
    bash "$T" run 1 "timeout 120 $p $(opts "$p" rxe)" > "$base.rxe.log" 2>&1 &
    local peer=$!
    sleep 3
    if [ -n "${CAPTURE:-}" ]; then
      bash "$T" capture rxebr0 "$base.pcap" \
        "ip netns exec $NS env ROCELINK_VERBS=$HOST LD_PRELOAD=$LIB timeout 120 $p $(opts "$p" verbs) $GUEST > $base.verbs.log 2>&1" || fail=1
    else
      verbs "$p" $(opts "$p" verbs) "$GUEST" > "$base.verbs.log" 2>&1 || fail=1
    fi
    wait "$peer" || fail=1
  else
    verbs "$p" $(opts "$p" verbs) > "$base.verbs.log" 2>&1 &
    local peer=$!
    sleep 1
    bash "$T" run 1 "timeout 120 $p $(opts "$p" rxe) $HOST" > "$base.rxe.log" 2>&1 || fail=1
    wait "$peer" || fail=1
  fi
  for side in verbs rxe; do
    printf '   %-6s ' "$side"
    grep -E "iters in .*usec/iter|^ +[0-9]+ +[0-9]+ +[0-9.]+" "$base.$side.log" | tail -1 || echo "(no result)"
  done
  if [ -f "$base.pcap" ]; then
    "$BIN" decode "$base.pcap" 2>&1 | tail -1
  fi
}

for p in "${PROGRAMS[@]}"; do
  run_pair "$p" server
  run_pair "$p" client
done
[ "$fail" = 0 ] && echo "all runs completed on both sides" || { echo "a run failed: see $OUT/verbs-*"; exit 1; }
