#!/usr/bin/env bash
# Run every fuzz target for a bounded time (default 600 s each), two at a time, on stable
# Rust (no sanitizer; the fuzzed crates forbid unsafe code) with debug assertions on, so
# integer overflow is caught. New inputs go to fuzz/work/<target>; the committed seeds in
# fuzz/corpus/<target> are read, not changed. A crash leaves fuzz/artifacts/<target>/.
# usage: fuzz/run.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(decode pcap ib l2l3 hsb ims)
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
cargo fuzz build -s none -O -a
mkdir -p logs
run() {
  local t=$1
  mkdir -p "work/$t"
  cargo fuzz run -s none -O -a "$t" "work/$t" "corpus/$t" -- -max_total_time="$secs" -print_final_stats=1 >"logs/$t.log" 2>&1
  local execs
  execs=$(grep -E '^stat::number_of_executed_units' "logs/$t.log" | awk '{print $2}')
  echo "$t: ${secs}s, ${execs:-?} executions, no crash"
}
status=0
for ((i = 0; i < ${#targets[@]}; i += 2)); do
  run "${targets[i]}" & p1=$!
  p2=""
  if [ $((i + 1)) -lt ${#targets[@]} ]; then run "${targets[i+1]}" & p2=$!; fi
  wait $p1 || { echo "${targets[i]}: CRASH (see fuzz/logs/${targets[i]}.log, fuzz/artifacts/)"; status=1; }
  if [ -n "$p2" ]; then wait $p2 || { echo "${targets[i+1]}: CRASH (see fuzz/logs/${targets[i+1]}.log)"; status=1; }; fi
done
exit $status
