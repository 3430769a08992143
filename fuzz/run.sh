#!/usr/bin/env bash
# Run every fuzz target for a fixed time: `bash fuzz/run.sh [SECONDS]`.
#
# The targets are what `cargo fuzz list` reports (the [[bin]]s of
# fuzz/Cargo.toml) whose source is fuzz_targets/TARGET.rs (`seedgen`, the
# seed generator, is a bin but no target), so a new target runs without
# editing this script.
# SECONDS is per target; without it each target gets BAT_FUZZ_BUDGET
# seconds (default 480) divided among the targets, at least 10 and at most
# 40, so that the whole run stays within a CI budget however many targets
# there are.
#
# Corpora: BAT_FUZZ_CORPUS (default fuzz/corpus) holds one directory per
# target and persists between runs (CI points it into its cache). Each
# target fuzzes a scratch copy of its corpus plus fuzz/seeds/TARGET (inputs
# made from the test data and every crash ever fixed, kept as regression
# inputs, replayed first); after a clean run the scratch corpus is merged
# back into the persistent one (`-merge=1`: only inputs that add coverage
# are kept, so it does not grow without bound).
#
# A crash, a leak, a timeout or an out-of-memory fails the run: the
# target's log tail and the crashing input's path (fuzz/artifacts/TARGET/…)
# are printed, every other target still runs, and the exit status is 1.
# Prints executions and coverage per target from libFuzzer's final stats.
set -euo pipefail
cd "$(dirname "$0")"
CORPUS_ROOT="${BAT_FUZZ_CORPUS:-corpus}"
TARGETS=()
while read -r t; do
  if [ -f "fuzz_targets/$t.rs" ]; then TARGETS+=("$t"); fi
done < <(cargo fuzz list)
if [ "${#TARGETS[@]}" -eq 0 ]; then
  echo "fuzz: cargo fuzz list found no target" >&2
  exit 1
fi
if [ -n "${1:-}" ]; then
  SECONDS_EACH="$1"
else
  SECONDS_EACH=$(( ${BAT_FUZZ_BUDGET:-480} / ${#TARGETS[@]} ))
  if [ "$SECONDS_EACH" -lt 10 ]; then SECONDS_EACH=10; fi
  if [ "$SECONDS_EACH" -gt 40 ]; then SECONDS_EACH=40; fi
fi
echo "fuzz: ${#TARGETS[@]} targets (${TARGETS[*]}), $SECONDS_EACH s each, corpus in $CORPUS_ROOT"
cargo +nightly fuzz build --release
total=0
failed=()
for t in "${TARGETS[@]}"; do
  mkdir -p "$CORPUS_ROOT/$t" "seeds/$t" "artifacts/$t"
  work="$(mktemp -d)"
  cp -R "$CORPUS_ROOT/$t/." "$work/"
  log="$(mktemp)"
  if ! cargo +nightly fuzz run --release "$t" "$work" "seeds/$t" -- \
      -max_total_time="$SECONDS_EACH" -rss_limit_mb=3072 -timeout=20 \
      -print_final_stats=1 > "$log" 2>&1; then
    tail -60 "$log"
    crash="$(grep -o 'Test unit written to [^ ]*' "$log" | tail -1 | sed 's/^Test unit written to //' || true)"
    echo "!!!!!! fuzz target $t FAILED"
    if [ -n "$crash" ]; then
      case "$crash" in /*) ;; *) crash="$(pwd)/$crash" ;; esac
      echo "!!!!!! crashing input: $crash"
      echo "!!!!!! reproduce: (cd fuzz && cargo +nightly fuzz run --release $t $crash)"
    else
      echo "!!!!!! no crashing input written (build or libFuzzer failure); log above"
    fi
    failed+=("$t")
    rm -rf "$work" "$log"
    continue
  fi
  execs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)"
  cov="$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo 0)"
  ft="$(grep -o 'ft: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo 0)"
  # Keep what this run found: merge the scratch corpus back (inputs that
  # add coverage only). A failed merge loses this run's finds, not the
  # corpus, and is no failure of the code under test.
  before="$(find "$CORPUS_ROOT/$t" -type f | wc -l)"
  if ! cargo +nightly fuzz run --release "$t" "$CORPUS_ROOT/$t" "$work" -- \
      -merge=1 -rss_limit_mb=3072 -timeout=20 > "$log.merge" 2>&1; then
    echo "fuzz $t: warning: merging the corpus back failed:"
    tail -5 "$log.merge"
  fi
  after="$(find "$CORPUS_ROOT/$t" -type f | wc -l)"
  echo "fuzz $t: $execs executions, coverage $cov edges, $ft features, no crash; corpus $before -> $after inputs"
  total=$((total + execs))
  rm -rf "$work" "$log" "$log.merge"
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzz: FAILED targets: ${failed[*]} (crashing inputs printed above, under $(pwd)/artifacts/)"
  exit 1
fi
echo "fuzz: $total executions in all, no crash"
