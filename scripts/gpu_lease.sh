#!/bin/bash
# The plan for a lent GPU (issue 36; README "A lent GPU, in practice"), one command of at most LIMIT seconds:
#  1. (BENCH_S > 0) benchmarks/gpu_bench.py: matmul peaks, the stacked Hoogland and Carroll steps against their floor;
#  2. PLAN=paper (the default): the paper queue for Carroll et al.'s sweep (python -m plateau_lib paper --page
#     transient_ridge): as many of its 100k-step runs as finish in the seconds left, M by M (paper.lease_groups),
#     each committed, packed into $OUT/paper.tar.gz;
#     PLAN=diagnosis: Hoogland et al.'s configuration for the stages diagnosis (issue 35), stacked and each step
#     from a CUDA graph (the float32 group's step also through torch.compile; the bfloat16 rounding does not
#     compile, so that group runs its graph uncompiled): model seeds 0-4 in float32 and 0-2 with bfloat16 operands,
#     one process each, their states packed into $OUT in parts of 15 MiB.
# Run from the repository root on the GPU machine:  LIMIT=540 bash scripts/gpu_lease.sh
# Back here:  python -m plateau_lib paper --unpack paper.tar.gz           (PLAN=paper)
#             cat diagnosis.tar.part-* | tar -x -C results/in_progress    (PLAN=diagnosis)
# A dry run on a CPU at tiny sizes:  OUT=$(mktemp -d) LIMIT=40 BENCH_S=0 PAPER_ARGS="--force-cpu --device cpu" \
#   bash scripts/gpu_lease.sh   (plans the sweep for the seconds left: no run fits, each is named as left)
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD PLATEAU_COMMIT=${PLATEAU_COMMIT:-unknown}
START=$(date +%s); LIMIT=${LIMIT:-540}; BENCH_S=${BENCH_S:-0}; BENCH_ARGS=${BENCH_ARGS:-}; PLAN=${PLAN:-paper}
PAPER_ARGS=${PAPER_ARGS:-}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
: > "$OUT/lease.log"
if [ "$BENCH_S" -gt 0 ]; then
  timeout "$BENCH_S" ${PYTHON:-python3} benchmarks/gpu_bench.py --out "$OUT" $BENCH_ARGS >> "$OUT/lease.log" 2>&1 \
    || echo "gpu_bench stopped or failed: exit $?" >> "$OUT/lease.log"
  tail -n 15 "$OUT/lease.log"
fi
LEFT=$(( LIMIT - ($(date +%s) - START) - 30 ))
echo "$PLAN: $LEFT s"
if [ "$PLAN" = paper ]; then
  ${PYTHON:-python3} -m plateau_lib paper --page transient_ridge --budget-s "$LEFT" --tar "$OUT/paper.tar.gz" \
    $PAPER_ARGS >> "$OUT/lease.log" 2>&1 || echo "paper queue: exit $?" >> "$OUT/lease.log"
  tail -n 20 "$OUT/lease.log"
elif [ "$PLAN" = diagnosis ]; then
  STATES=$(mktemp -d)
  ${PYTHON:-python3} scripts/icl_diagnosis.py --seeds 0 1 2 3 4 --budget-s "$LEFT" --cuda-graphs --compile \
    --no-progress --out "$STATES" > "$OUT/fp32.log" 2>&1 &
  ${PYTHON:-python3} scripts/icl_diagnosis.py --seeds 0 1 2 --operands bfloat16 --budget-s "$LEFT" --cuda-graphs \
    --no-progress --out "$STATES" > "$OUT/bf16.log" 2>&1 &
  wait
  tail -n 8 "$OUT/fp32.log" "$OUT/bf16.log"
  cat "$OUT/fp32.log" "$OUT/bf16.log" >> "$OUT/lease.log" && rm "$OUT/fp32.log" "$OUT/bf16.log"
  tar -C "$STATES" -cf - . | split -b 15m - "$OUT/diagnosis.tar.part-"
else
  echo "PLAN must be paper or diagnosis, got $PLAN" | tee -a "$OUT/lease.log"; exit 2
fi
ls -la "$OUT"; echo "lease script: $(( $(date +%s) - START )) s"
