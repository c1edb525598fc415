#!/usr/bin/env bash
# Interop with perftest over the Linux kernel's RoCE (Soft-RoCE, rdma_rxe): `rocelink perf X`
# against perftest's `ib_X` running in a Debian guest booted by ../shared/tools/rxe-vm, for
# the six tests, rocelink as server and as client. Not in CI (it boots QEMU); needs root and
# ~2 GB of disk, and the first run builds the guest image (a few minutes).
#
# Each run's two outputs go to $OUT/perf-<test>-<rocelink role>.{rocelink,perftest}.log, the
# guest's rxe counters before and after to .rxe, and everything is printed side by side.
#
# usage: tests/interop/perf.sh [TEST...]      (default: all six)
#   EXTRA="-c UD" tests/interop/perf.sh send_bw send_lat    options for both sides (the logs
#   EXTRA="-q 4"  tests/interop/perf.sh write_bw read_bw    are named after them)
#   BIN=/path/to/rocelink                                    a built binary (no cargo build)
set -euo pipefail
cd "$(dirname "$0")/../.."
T=${RXEVM:-../shared/tools/rxe-vm/rxe-vm.sh}
OUT=${OUT:-target/interop}
NS=${RXEVM_NS:-rxevm}
HOST=10.77.0.1
GUEST=10.77.0.11
TESTS=("$@")
[ ${#TESTS[@]} -gt 0 ] || TESTS=(write_bw read_bw send_bw write_lat read_lat send_lat)
mkdir -p "$OUT"
EXTRA=${EXTRA:-}
TAG=$(echo "$EXTRA" | tr -d ' -')
if [ -z "${BIN:-}" ]; then
  cargo build --release -q
  BIN=$PWD/target/release/rocelink
fi

[ -e /var/tmp/rxe-vm/img/rootfs.img ] || { bash "$T" deps; bash "$T" build; }
bash "$T" status 2>/dev/null | grep -q "vm1.*running" || bash "$T" start 1

# the guest runs on an emulated CPU (TCG): a few MB/s, so modest iteration counts
opts() {  # $1 test
  case $1 in
    # perftest before 6.2x refuses a UD message larger than the MTU (1024 here)
    *_bw) case "$EXTRA" in *UD*) echo "-n 500 -s 1024" ;; *) echo "-n 500 -s 65536" ;; esac ;;
    *_lat) echo "-n 300 -s 64" ;;
  esac
}
counters() {  # the guest's rxe hardware counters, one "name value" per line
  bash "$T" run 1 'cd /sys/class/infiniband/rxe0/ports/1/hw_counters && for f in *; do echo "$f $(cat $f)"; done' 2>/dev/null
}

fail=0
run_pair() {  # $1 test, $2 rocelink role (client|server)
  local t=$1 role=$2 o
  o="$(opts "$t") $EXTRA"
  local base="$OUT/perf-$t${TAG:+-$TAG}-$role"
  echo "== $t $EXTRA: rocelink $role, ib_$t $( [ "$role" = client ] && echo server || echo client ) in the rxe guest"
  counters > "$base.rxe.before" || true
  if [ "$role" = client ]; then
    bash "$T" run 1 "timeout 120 ib_$t -d rxe0 -x 1 -F $o" > "$base.perftest.log" 2>&1 &
    local peer=$!
    sleep 3
    ip netns exec "$NS" timeout 120 "$BIN" perf "$t" "$GUEST" --bind "$HOST" -x 1 -F $o \
      --timeout 60 --no-control > "$base.rocelink.log" 2>&1 || fail=1
  else
    ip netns exec "$NS" timeout 120 "$BIN" perf "$t" --bind "$HOST" -x 1 -F $o \
      --timeout 60 --no-control > "$base.rocelink.log" 2>&1 &
    local peer=$!
    sleep 1
    bash "$T" run 1 "timeout 120 ib_$t -d rxe0 -x 1 -F $o $HOST" > "$base.perftest.log" 2>&1 || fail=1
  fi
  wait $peer || fail=1
  counters > "$base.rxe.after" || true
  join "$base.rxe.before" "$base.rxe.after" 2>/dev/null \
    | awk '$3 != $2 { printf "%s +%d\n", $1, $3 - $2 }' > "$base.rxe" || true
  # a result row on both sides (the size column first, then figures); read_lat's server
  # is passive and prints none, in perftest as in rocelink
  local rows=("$base.rocelink.log" "$base.perftest.log")
  if [ "$t" = read_lat ]; then
    [ "$role" = server ] && rows=("$base.perftest.log") || rows=("$base.rocelink.log")
  fi
  for f in "${rows[@]}"; do
    grep -Eq '^ *[0-9]+ +[0-9]+ +[0-9.]+' "$f" || { echo "   no result row in $f"; fail=1; }
  done
  paste -d '|' <(sed -e 's/\t/    /g' "$base.rocelink.log" | sed -n '/^---/,$p' | cut -c1-100 | awk '{printf "%-100s\n", $0}') \
               <(sed -e 's/\t/    /g' "$base.perftest.log" | sed -n '/^---/,$p' | cut -c1-100) | sed 's/^/   /' | head -40 || true
  echo "   guest rxe counters that moved: $(tr '\n' ' ' < "$base.rxe")"
}
for t in "${TESTS[@]}"; do
  run_pair "$t" server
  run_pair "$t" client
done
[ "$fail" = 0 ] && echo "perf interop: all runs completed" || { echo "perf interop: FAILED"; exit 1; }
