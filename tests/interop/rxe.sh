#!/usr/bin/env bash
# Interop with the Linux kernel's RoCE (Soft-RoCE, rdma_rxe): rocelink pingpong against
# rdma-core's ibv_{rc,uc,ud}_pingpong running in a Debian guest booted by
# ../shared/tools/rxe-vm, rocelink as client and as server. Needs root and ~2 GB of disk;
# the first run builds the guest image (a few minutes). Captures go to $OUT.
#
# usage: tests/interop/rxe.sh [ITERS]      (default 1000)
set -euo pipefail
cd "$(dirname "$0")/../.."
ITERS=${1:-1000}
T=${RXEVM:-../shared/tools/rxe-vm/rxe-vm.sh}
OUT=${OUT:-target/interop}
NS=${RXEVM_NS:-rxevm}
HOST=10.77.0.1
GUEST=10.77.0.11
mkdir -p "$OUT"
cargo build --release -q
BIN=$PWD/target/release/rocelink

[ -e /var/tmp/rxe-vm/img/rootfs.img ] || { bash "$T" deps; bash "$T" build; }
bash "$T" status 2>/dev/null | grep -q "vm1.*running" || bash "$T" start 1

fail=0
run_pair() {  # $1 kind, $2 rocelink role (client|server)
  local kind=$1 role=$2 size=()
  [ "$kind" = ud ] && size=(-s 1000)
  local log="$OUT/$kind-$role.log" pcap="$OUT/$kind-rocelink-$role.pcap"
  echo "== $kind: rocelink $role, ibv_${kind}_pingpong $( [ "$role" = client ] && echo server || echo client ) in the rxe guest"
  if [ "$role" = client ]; then
    bash "$T" run 1 "timeout 120 ibv_${kind}_pingpong -d rxe0 -g 1 -n $ITERS ${size[*]}" > "$log.peer" 2>&1 &
    local peer=$!
    sleep 3
    ip netns exec "$NS" timeout 120 "$BIN" pingpong "$kind" "$GUEST" --bind "$HOST" -g 1 -n "$ITERS" "${size[@]}" --pcap "$pcap" > "$log" 2>&1 || fail=1
  else
    ip netns exec "$NS" timeout 120 "$BIN" pingpong "$kind" --bind "$HOST" -g 1 -n "$ITERS" "${size[@]}" --pcap "$pcap" > "$log" 2>&1 &
    local peer=$!
    sleep 1
    bash "$T" run 1 "timeout 120 ibv_${kind}_pingpong -d rxe0 -g 1 -n $ITERS ${size[*]} $HOST" > "$log.peer" 2>&1 || fail=1
  fi
  wait $peer || fail=1
  echo "   rocelink:"; sed 's/^/     /' "$log"
  echo "   rdma-core:"; sed 's/^/     /' "$log.peer"
  if "$BIN" decode --strict "$pcap" > /dev/null; then
    echo "   $pcap: $("$BIN" decode --json "$pcap" | wc -l) packets, every ICRC verified"
  else
    echo "   $pcap: ICRC FAILURES"; fail=1
  fi
}
for kind in rc uc ud; do
  run_pair "$kind" client
  run_pair "$kind" server
done
[ "$fail" = 0 ] && echo "interop: all runs completed" || { echo "interop: FAILED"; exit 1; }
