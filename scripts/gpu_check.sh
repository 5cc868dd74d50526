#!/usr/bin/env bash
# The GPU checks of issue 33 (item 4) as one short run on a lent GPU machine, in priority order,
# each with its own time limit so that a slow step cannot starve the others:
#   1. the estimator and model oracle tests with the neural test models on CUDA
#      (SEQQ_TEST_DEVICE=cuda, tests/oracles.py);
#   2. the benchmark suite on CUDA (quick) -> $OUT/RESULTS-gpu.md;
#   3. a 3 % slice of the paper-size Fig. 3 sweep on CUDA, timed and projected to N = 1000
#      (RESULTS.md (f)'s slice) -> $OUT/RESULTS-gpu-slice.md.
# Logs and results go to $OUT (the device tool's folder; outputs/gpu elsewhere).
#
# The GPU image has torch, pandas, pyarrow, matplotlib, transformers, scipy and tqdm, but no
# network; the rest of seqq's dependencies travel as wheels. Here, once (needs pip's registry):
#     bash scripts/gpu_check.sh wheels      # -> .whl/ (~4 MB; add /.whl/ to .git/info/exclude)
# then on the device, with `.whl` carried:
#     bash scripts/gpu_check.sh             # at most 7.5 minutes (run timeout_s=540)
set -uo pipefail
cd "$(dirname "$0")/.."

WHEELS=(hydra-core==1.3.8 omegaconf==2.3.1 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19
        outlines_core==0.2.14 arviz-stats==0.8.0)
if [[ "${1:-}" == wheels ]]; then
  mkdir -p .whl
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux_2_28_x86_64 -d .whl "${WHEELS[@]}"
  # antlr4-python3-runtime 4.9.3 (Hydra's parser) is published as a source archive only
  python3 -m pip wheel -q --no-deps -w .whl antlr4-python3-runtime==4.9.3
  ls .whl
  exit 0
fi

OUT=${OUT:-outputs/gpu}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || { echo "no wheels: run 'bash scripts/gpu_check.sh wheels' here first"; exit 2; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt"
python3 -c "import torch, seqq; assert torch.cuda.is_available(); print(torch.__version__, torch.cuda.get_device_name())" \
  | tee -a "$OUT/gpu.txt" || exit 3

step() {  # step NAME SECONDS COMMAND...: run with a limit, log to $OUT/NAME.log, say how it ended
  local name=$1 limit=$2; shift 2
  local start=$SECONDS
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  echo "$name: exit $? after $((SECONDS - start)) s (limit $limit s)" | tee -a "$OUT/steps.txt"
}

step tests-cuda 150 env SEQQ_TEST_DEVICE=cuda python3 -m pytest -q -p no:cacheprovider \
  --durations=15 tests/test_estimators.py tests/test_exact.py tests/test_smc.py \
  tests/test_wor.py tests/test_randomized_beam.py tests/test_twisted.py \
  tests/test_uncertainty.py tests/test_union_estimators.py tests/test_calls_and_reuse.py \
  tests/test_ground_truth.py
step bench-cuda 150 python3 -m benchmarks --mode quick --device cuda --out "$OUT/RESULTS-gpu.md"
step paper-slice-cuda 150 python3 -m benchmarks --paper-slice 0.03 --device cuda \
  --out "$OUT/RESULTS-gpu-slice.md"
tail -n 3 "$OUT"/*.log
