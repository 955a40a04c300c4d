#!/bin/bash
# The plan for a lent GPU (issue 36; README "A lent GPU, in practice"), one command of at most LIMIT seconds:
#  1. (BENCH_S > 0) benchmarks/gpu_bench.py: matmul peaks, the stacked Hoogland and Carroll steps against their floor;
#  2. PLAN=paper (the default): the paper queue for Carroll et al.'s sweep (python -m plateau_lib paper --page
#     transient_ridge): as many of its 100k-step runs as finish in the seconds left, M by M (paper_queue.lease_groups),
#     each committed, packed into $OUT/paper.tar.gz;
#     PLAN=sgld: Hoogland et al.'s estimator at the authors' full budget (10 chains x 5,000 draws from the first,
#     n = 2^20) at five kept checkpoints of the committed seed-1 run (40k, 80k, 126k, 320k, 500k), on the GPU, each
#     row and its chains' loss traces kept as made, packed into $OUT/sgld.tar.gz;
#     PLAN=diagnosis: Hoogland et al.'s configuration for the stages diagnosis (issue 35), stacked and each step
#     from a CUDA graph (the float32 group's step also through torch.compile; the bfloat16 rounding does not
#     compile, so that group runs its graph uncompiled): model seeds 0-4 in float32 and 0-2 with bfloat16 operands,
#     one process each, their states packed into $OUT in parts of 15 MiB.
# Run from the repository root on the GPU machine:  LIMIT=540 bash scripts/gpu_lease.sh
# Back here:  python -m plateau_lib paper --unpack paper.tar.gz           (PLAN=paper)
#             tar -xzf sgld.tar.gz -C results/in_progress                 (PLAN=sgld)
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
elif [ "$PLAN" = sgld ]; then
  SEED1=icl_diagnosis-seed1-float32-cpu-9f3124abd06b377d
  # the estimator checks its budget only between checkpoints (about 100 s each here): the timeout stops it
  # in a row, so the rows already made are packed below whatever happens
  timeout "$LEFT" ${PYTHON:-python3} scripts/icl_diagnosis.py --seeds 1 --stream cpu \
    --llc-at 40292 80807 126262 318181 499999 --as-run --chains 10 --device ${SGLD_DEVICE:-cuda} \
    --budget-s "$LEFT" >> "$OUT/lease.log" 2>&1 \
    || echo "sgld: exit $?" >> "$OUT/lease.log"
  tail -n 8 "$OUT/lease.log"
  (cd results/in_progress && tar -czf "$OUT/sgld.tar.gz" $SEED1/llc.csv $(ls $SEED1/trace_*_10x5000+0.npy 2>/dev/null))
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
  echo "PLAN must be paper, sgld or diagnosis, got $PLAN" | tee -a "$OUT/lease.log"; exit 2
fi
ls -la "$OUT"; echo "lease script: $(( $(date +%s) - START )) s"
