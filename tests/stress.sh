#!/usr/bin/env bash
# Flaky-test hunt: run the whole suite STRESS_RUNS times (default 5) as CI does (pytest -n TEST_WORKERS)
# while two CPU hogs keep the machine busy. Prints per-run counts and failing test ids; exits 1
# if any run failed.     make test-stress [STRESS_RUNS=N] [PYTEST_ARGS=...]
# Not part of `make test` or CI: it takes N full suite runs.
set -uo pipefail
PY=${PY:-.venv/bin/python}
RUNS=${STRESS_RUNS:-5}
HOGS=${STRESS_HOGS:-2}
LOGS=${STRESS_LOGS:-$(mktemp -d -t loaderbench-stress.XXXXXX)}
mkdir -p "$LOGS"
hogs=()
trap 'kill "${hogs[@]}" 2>/dev/null' EXIT
trap 'exit 130' INT TERM
for ((h = 0; h < HOGS; h++)); do
  python3 -c 'while True: pass' & hogs+=($!)
done
bad=0
summary=$LOGS/summary.txt
: >"$summary"
for ((i = 1; i <= RUNS; i++)); do
  t0=$SECONDS
  # shellcheck disable=SC2086
  "$PY" -m pytest -n "${TEST_WORKERS:-auto}" --dist loadfile --no-loadscope-reorder -p no:cacheprovider ${PYTEST_ARGS:-} >"$LOGS/run$i.log" 2>&1
  rc=$?
  ((rc != 0)) && bad=1
  counts=$(grep -E '^=+ .*(passed|failed|error).* in [0-9.]+s' "$LOGS/run$i.log" | tail -1 | tr -d '=')
  echo "run $i: rc=$rc ${counts:- (no summary line)} [$((SECONDS - t0)) s]" | tee -a "$summary"
  grep -E '^(FAILED|ERROR) ' "$LOGS/run$i.log" | sed 's/^/    /' | tee -a "$summary"
done
echo "logs: $LOGS"
exit $bad
