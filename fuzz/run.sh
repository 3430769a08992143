#!/usr/bin/env bash
# Run every fuzz target for a fixed time: `bash fuzz/run.sh SECONDS`.
# Corpora live in fuzz/corpus/TARGET (seeded from fuzz/seeds/TARGET, which
# holds inputs made from the test data and every crash ever fixed, kept as
# regression inputs); each target first replays its seeds, then fuzzes.
# Prints executions and coverage per target from libFuzzer's final stats.
set -euo pipefail
cd "$(dirname "$0")"
SECONDS_EACH="${1:-40}"
TARGETS="record pack objects delta wire bundle import safetensors contract_json"
cargo +nightly fuzz build --release
total=0
for t in $TARGETS; do
  mkdir -p "corpus/$t" "seeds/$t"
  log="$(mktemp)"
  if ! cargo +nightly fuzz run --release "$t" "corpus/$t" "seeds/$t" -- \
      -max_total_time="$SECONDS_EACH" -rss_limit_mb=3072 -timeout=20 \
      -print_final_stats=1 > "$log" 2>&1; then
    tail -60 "$log"
    echo "fuzz target $t FAILED (crash input under fuzz/artifacts/$t)"
    exit 1
  fi
  execs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)"
  cov="$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo 0)"
  ft="$(grep -o 'ft: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo 0)"
  echo "fuzz $t: $execs executions, coverage $cov edges, $ft features, no crash"
  total=$((total + execs))
  rm -f "$log"
done
echo "fuzz: $total executions in all, no crash"
