#!/usr/bin/env bash
# The GPU checks on one GPU node, in a fixed order, within a time budget: what a short lease of a node can
# settle, most valuable first. Studies resume, so a second lease (with the same RESULTS) goes on where the
# first stopped.
#
#   tools/gpu-node.sh RESULTS [SECONDS]      # SECONDS: the whole budget (default 540)
#
# Steps, each given what is left of the budget and skipped when too little is left:
#   1. gpu-feed, ResNet-50 pinned on 16 cores, 4 and 16 workers, non_blocking and blocking copies, 3 repetitions:
#      whether the host goes on during a non_blocking copy, and whether 4 workers keep the GPU fed;
#   2. the CUDA tests (the GPU step, CUDA events, nvJPEG decoding, CUDA in forked workers);
#   3. gpu-feed, the same cells unpinned (pinning's gain and copy speed), 3 repetitions;
#   4. gpu-feed, the pinned non_blocking cells to 5 repetitions (the pin-memory thread's share, a median);
#   5. the doctor on examples/train_resnet.py with CUDA, validating the change it suggests in the loop;
#   6. gpu-batch-size;
#   7. the ladder (the tutorial's steps), to its 5 repetitions;
#   8. gpu-decode.
# A step that passed before (steps.tsv) is not run again; a study's records that exist are not measured again, so
# a later lease goes on where this one stopped (start it from the reference records: cp -r
# results/reference/h200/. RESULTS/). Writes RESULTS/<study>/ records and RESULTS/gpu-node/*.log (one log per
# step, and steps.tsv: step, exit status, seconds). PY names the Python (default python3); the node needs 16 CPUs
# and one CUDA device.
set -uo pipefail

results=${1:?usage: tools/gpu-node.sh RESULTS [SECONDS]}
budget=${2:-540}
py=${PY:-python3}
logs="$results/gpu-node"
mkdir -p "$logs"
end=$(($(date +%s) + budget))
export PYTHONUNBUFFERED=1

# step NAME MIN_SECONDS CMD...: run CMD with what is left of the budget, if at least MIN_SECONDS is left
step() {
  local name=$1 min=$2 left rc start
  shift 2
  left=$((end - $(date +%s)))
  if grep -q "^$name	0	" "$logs/steps.tsv" 2>/dev/null; then
    echo "== $name: passed before"
    return
  fi
  if ((left < min)); then
    printf '%s\tskipped\t0\n' "$name" >>"$logs/steps.tsv"
    echo "== $name: skipped ($left s left, needs $min)"
    return
  fi
  echo "== $name ($left s left)"
  start=$(date +%s)
  timeout --signal=INT --kill-after=20 "$left" "$@" >"$logs/$name.log" 2>&1
  rc=$?
  printf '%s\t%s\t%s\n' "$name" "$rc" "$(($(date +%s) - start))" >>"$logs/steps.tsv"
  echo "   exit $rc after $(($(date +%s) - start)) s"
  tail -n 5 "$logs/$name.log"
}

feed=(-m loaderbench run gpu-feed --results "$results")
step feed-copies 60 "$py" "${feed[@]}" -k "model=resnet50 cores=16 pin_memory=true num_workers=4|16"
step cuda-tests 60 "$py" -m pytest -q -ra -p no:cacheprovider tests/test_gpu_cells.py tests/test_consumers.py \
  tests/test_gpu_decoder.py tests/test_gpu_claims.py
step feed-unpinned 40 "$py" "${feed[@]}" -k "model=resnet50 cores=16 pin_memory=false num_workers=4|16"
step feed-pin-thread 40 "$py" "${feed[@]}" --repetitions 5 \
  -k "model=resnet50 cores=16 pin_memory=true non_blocking=true num_workers=4|16"
step doctor 60 "$py" -m loaderbench doctor --steps 60 --try auto --out "$results/doctor-cuda" \
  -- "$py" examples/train_resnet.py --device cuda --epochs 12
step batch-size 60 "$py" -m loaderbench run gpu-batch-size --results "$results"
step ladder 60 "$py" -m loaderbench run ladder --results "$results"
step decode 60 "$py" -m loaderbench run gpu-decode --results "$results"
exit 0
