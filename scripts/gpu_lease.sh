#!/bin/bash
# The plan for a lent GPU (issue 36; README "A lent GPU, in practice"), one command of at most LIMIT seconds:
#  1. benchmarks/gpu_bench.py: matmul peaks, the stacked Hoogland and Carroll steps against their floor, checks;
#  2. Hoogland et al.'s configuration for the stages diagnosis (issue 35), stacked and each step from a CUDA graph
#     (the float32 group's step also through torch.compile; the bfloat16 rounding does not compile, so that group
#     runs its graph uncompiled): model seeds 0-4 in float32 and 0-2 with bfloat16 operands, one process each;
#  3. the states (kept checkpoints, evaluations or resume states) packed into $OUT in parts of 15 MiB.
# Run from the repository root on the GPU machine:  LIMIT=540 bash scripts/gpu_lease.sh
# Back here:  cat diagnosis.tar.part-* | tar -x -C results/in_progress
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PLATEAU_COMMIT=${PLATEAU_COMMIT:-unknown}
START=$(date +%s); LIMIT=${LIMIT:-540}; BENCH_S=${BENCH_S:-150}; BENCH_ARGS=${BENCH_ARGS:-}
STATES=$(mktemp -d)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
timeout "$BENCH_S" ${PYTHON:-python3} benchmarks/gpu_bench.py --out "$OUT" $BENCH_ARGS > "$OUT/bench.log" 2>&1 \
  || echo "gpu_bench stopped or failed: exit $?" >> "$OUT/bench.log"
tail -n 15 "$OUT/bench.log"
LEFT=$(( LIMIT - ($(date +%s) - START) - 30 ))
echo "training budget: $LEFT s"
${PYTHON:-python3} scripts/icl_diagnosis.py --seeds 0 1 2 3 4 --budget-s "$LEFT" --cuda-graphs --compile --no-progress \
  --out "$STATES" > "$OUT/fp32.log" 2>&1 &
${PYTHON:-python3} scripts/icl_diagnosis.py --seeds 0 1 2 --operands bfloat16 --budget-s "$LEFT" --cuda-graphs --no-progress \
  --out "$STATES" > "$OUT/bf16.log" 2>&1 &
wait
tail -n 8 "$OUT/fp32.log" "$OUT/bf16.log"
cat "$OUT/fp32.log" "$OUT/bf16.log" >> "$OUT/bench.log" && rm "$OUT/fp32.log" "$OUT/bf16.log"
mv "$OUT/bench.log" "$OUT/lease.log"
tar -C "$STATES" -cf - . | split -b 15m - "$OUT/diagnosis.tar.part-"
ls -la "$OUT"; echo "lease script: $(( $(date +%s) - START )) s"
