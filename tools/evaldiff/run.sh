#!/usr/bin/env bash
# Differential check of the evaluation side against the reference Python.
# Not a test: it needs a reference checkout OUTSIDE the repository.
#   tools/evaldiff/run.sh REF_CHECKOUT [N]
# Compares stdout, exit code, written files and the error code for N random
# leakage inputs, raw evaluations and baseline/candidate pairs.
set -u
REF=$(cd "$1" && pwd); N=${2:-100}
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../.." && pwd)
BAT="$ROOT/target/release/bat"; [ -x "$BAT" ] || (cd "$ROOT" && cargo build --release -q)
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
ck() { printf "$1%.0s" $(seq 64); }
fails=0
echo '["secret-task-42", "Stra\u00dfe Label", "HeldOut Q7"]' > "$W/markers.json"
for i in $(seq 1 "$N"); do
  python3 "$HERE/gen_leakage.py" "$i" > "$W/in.jsonl"
  (cd "$REF" && python3 -m scripts.check_rl_train_leakage "$W/in.jsonl" --heldout-markers "$W/markers.json" > "$W/r.out" 2>/dev/null; echo $? >> "$W/r.out")
  "$BAT" firewall scan "$W/in.jsonl" --heldout-markers "$W/markers.json" > "$W/b.out" 2>/dev/null; echo $? >> "$W/b.out"
  cmp -s "$W/r.out" "$W/b.out" || { fails=$((fails+1)); echo "leakage differs: seed $i"; }
  python3 "$HERE/gen_raw.py" "$i" > "$W/raw.json"; rm -f "$W/r.s" "$W/b.s"
  (cd "$REF" && python3 -m scripts.summarize_bat_core_eval --raw "$W/raw.json" --checkpoint-sha256 ck --output "$W/r.s" > "$W/r.out" 2> "$W/r.err"; echo $? >> "$W/r.out"; tail -1 "$W/r.err" | sed 's/^ValueError: //' >> "$W/r.out")
  "$BAT" eval summarize --raw "$W/raw.json" --checkpoint-sha256 ck --output "$W/b.s" > "$W/b.out" 2> "$W/b.err"; echo $? >> "$W/b.out"; tail -1 "$W/b.err" | sed 's/^error: //' >> "$W/b.out"
  cmp -s "$W/r.out" "$W/b.out" || { fails=$((fails+1)); echo "summary differs: seed $i"; }
  python3 "$HERE/gen_pair.py" "$i" b > "$W/b.raw"; python3 "$HERE/gen_pair.py" "$i" c > "$W/c.raw"; rm -f "$W"/*.s "$W"/*g.json "$W"/*p.json
  (cd "$REF" && python3 -m scripts.summarize_bat_core_eval --raw "$W/b.raw" --checkpoint-sha256 "$(ck b)" --output "$W/b.s" > /dev/null && python3 -m scripts.summarize_bat_core_eval --raw "$W/c.raw" --checkpoint-sha256 "$(ck c)" --output "$W/c.s" > /dev/null) || continue
  H=(); case $((i % 3)) in 1) echo '{"status":"passed"}' > "$W/h.json"; H=(--training-health "$W/h.json");; 2) echo '{"status":"failed"}' > "$W/h.json"; H=(--training-health "$W/h.json");; esac
  (cd "$REF" && python3 -m scripts.check_bat_core_gate --baseline "$W/b.s" --candidate "$W/c.s" "${H[@]}" --gate-output "$W/rg.json" --prescription-output "$W/rp.json" > "$W/r.out" 2>&1)
  "$BAT" gate --baseline "$W/b.s" --candidate "$W/c.s" "${H[@]}" --gate-output "$W/bg.json" --prescription-output "$W/bp.json" > "$W/b.out" 2>&1
  { cmp -s "$W/r.out" "$W/b.out" && cmp -s "$W/rg.json" "$W/bg.json" && cmp -s "$W/rp.json" "$W/bp.json"; } || { fails=$((fails+1)); echo "gate differs: seed $i"; }
done
echo "$((N * 3)) comparisons, $fails differ"
[ "$fails" = 0 ]
