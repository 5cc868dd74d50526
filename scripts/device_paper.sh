#!/usr/bin/env bash
# The paper-size experiments of issue 41 that outgrow a 2-core CPU, as one run on a lent GPU
# machine (16 cores, one GPU). Each sweep is sharded over processes; every process stops at
# LIMIT seconds (SIGTERM: parts saved) and the sweeps' new results and ground truths come back
# as $OUT/sweeps.tgz, to be unpacked into outputs/sweeps/ here and resumed on the CPU:
#     tar xzf sweeps.tgz -C outputs/sweeps && make paper SIZE=paper     # the rest, resumable
# The sweeps' rows are keyed by (history, query, method, level S), so any shard layout resumes.
#
#   GPU (device=cuda): Fig. 4b/13 temperature sweeps, whose ground truth is exact enumeration
#     at K = 4 (305,320 calls per query on Shakespeare, 922,180 on MOOCs) at 10 temperatures;
#   CPU (device=cpu, one thread each): Figs 10/11's `budgets` sweeps from Fig. 3's committed truths.
#
# Wheels for the packages the GPU image lacks: `bash scripts/gpu_check.sh wheels` here first,
# then run with `.whl` carried: bash scripts/device_paper.sh   (LIMIT=510 by default)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-outputs/device}
LIMIT=${LIMIT:-510}
GPU=${GPU:-cuda}  # GPU=cpu NO_WHEELS=1 LIMIT=20: a dry run here
ROOT=/tmp/sweeps
mkdir -p "$OUT" "$ROOT/logs"
if [[ -z ${NO_WHEELS:-} ]]; then  # NO_WHEELS=1: a venv with seqq installed is active (a dry run)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || { echo "no wheels: run 'bash scripts/gpu_check.sh wheels'"; exit 2; }
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 SEQQ_THREADS=1 OMP_NUM_THREADS=1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/device.txt"
nproc | tee -a "$OUT/device.txt"

for name in budgets; do  # sweeps that reuse Fig. 3's committed ground truth
  mkdir -p "$ROOT/$name-paper/ground_truth"
  cp docs/reproduction/ground_truth/*.parquet "$ROOT/$name-paper/ground_truth/"
done
touch "$ROOT/.start"

sweep() {  # sweep PRESET DATASET SHARD SHARDS DEVICE
  local from=""
  [[ $2 == moocs ]] && from=sweep.histories_from=model
  local left=$((LIMIT - SECONDS))
  ((left > 10)) || return 0
  timeout "$left" python3 -c 'import sys; from seqq.commands.cli import main; sys.exit(main())' \
    query-sweep preset="$1" size=paper dataset="$2" model=authors $from device="$5" \
    sweep.root=$ROOT sweep.shard="$3" sweep.shards="$4" sweep.report=false \
    sweep.refine_truth=null sweep.progress=false > "$ROOT/logs/$1-$2-$3of$4.log" 2>&1
  echo "$1 $2 shard $3/$4 on $5: exit $?" >> "$ROOT/logs/exits.txt"
}

# One process on the GPU: a sweep sizes its row chunks to the GPU's free memory, so two
# processes sharing it run each other out of memory (measured: 6 of 6 died so on an H200).
(sweep temperature shakespeare 0 1 "$GPU"; sweep temperature moocs 0 1 "$GPU") &
for s in $(seq 0 6); do sweep budgets shakespeare "$s" 7 cpu & done
for s in $(seq 0 6); do sweep budgets moocs "$s" 7 cpu & done
wait
nvidia-smi --query-gpu=memory.used --format=csv,noheader >> "$OUT/device.txt"
cat "$ROOT/logs/exits.txt"
# only what this run wrote: results, new ground truths, run records and logs
(cd "$ROOT" && find . -type f -newer .start ! -name .start | tar czf "$OUT/sweeps.tgz" -T -)
ls -la "$OUT"
