#!/usr/bin/env bash
# One call on a lent GPU machine (one GPU, 16 cores, nothing to download there): the GPU suite on cores 4-15 and,
# beside it, the Studio-sized run (labs on the CPU target, pinned to cores 0-3, one at a time), all inside BUDGET_S.
#
#   OUT=/some/dir BUDGET_S=480 bash benchmarks/gpu_lease.sh
#
# Python packages the machine lacks travel as wheels in .whl/ (installed under /tmp/site, never over its own):
# benchmarks/gpu_lease_wheels.txt lists them and says how to fetch them.
# What comes back: env.txt, suite.log, studio4.log, gpu.tgz (the suite's report, logs, executed labs and profile
# summaries) and studio4.tgz (the executed labs and the run's summary). The lab runner runs labs in their numbers'
# order whatever LABS_4's; LABS_4 and the --timeout-for lines share out the budget.
set -u
OUT=${OUT:-runs/gpu_lease}
BUDGET_S=${BUDGET_S:-480}
LABS_4=${LABS_4:-02 07 01 03}
STUDIO_CORES=${STUDIO_CORES:-0-3}  # the Studio-sized machine: ml.m5.xlarge's 4 vCPUs
GPU_CORES=${GPU_CORES:-4-15}
WHEELS=${WHEELS:-.whl}  # Python packages the machine lacks, as wheels
SUITE_MODE=${SUITE_MODE:-}  # --tiny: a rehearsal of this script on a CPU
mkdir -p "$OUT"
start=$(date +%s)
left() { echo $((BUDGET_S - ($(date +%s) - start))); }
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false

if compgen -G "$WHEELS/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHEELS"/*.whl \
        && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}  # the helpers from this checkout (nothing is pip-installed there)
{
    date -u +%FT%TZ
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
    nproc
    python3 -c "import torch, transformers; print(torch.__version__, torch.version.cuda, transformers.__version__)"
    python3 -c "import papermill, ipykernel, sagemaker.core, sagemaker.train, helpers.jobs, course.run_labs; print('imports ok')"
    git rev-parse --short HEAD 2>/dev/null
} >"$OUT/env.txt" 2>&1
echo "set up in $(($(date +%s) - start)) s"

# the Studio-sized machine: 4 cores, no GPU, the labs a learner runs at their defaults, one at a time
(
    CUDA_VISIBLE_DEVICES="" timeout $(($(left) - 25)) taskset -c "$STUDIO_CORES" \
        python3 -m course.run_labs --target local_cpu --streams 1 --labs $LABS_4 --out /tmp/studio4
) >"$OUT/studio4.log" 2>&1 &
studio=$!

taskset -c "$GPU_CORES" timeout $(($(left) - 20)) python3 benchmarks/gpu_suite.py $SUITE_MODE --out /tmp/gpu \
    --steps lab07 bench_random bench_titles \
    --step-args bench_random "--trials 2 --warmup_steps 10 --steps 40" \
    --step-args bench_titles "--trainers ours --layouts padded,bucketed --trials 1 --epochs 2 --title_rows 8192 --val_rows 2000" \
    --timeout-for lab07 "${T_LAB07:-240}" --timeout-for bench_random "${T_RANDOM:-150}" \
    --timeout-for bench_titles "${T_TITLES:-60}" >"$OUT/suite.log" 2>&1
echo "suite ended after $(($(date +%s) - start)) s"
wait $studio
echo "studio-sized run ended after $(($(date +%s) - start)) s"
CUDA_VISIBLE_DEVICES="" python3 -m course.lab_time --executed /tmp/studio4 >/tmp/studio4/lab_time.txt 2>&1 || true

# what comes back must be small (8 files, 16 MB each): the reports, logs, executed notebooks and the profiles'
# summaries, never the jobs' models or checkpoints (the first lease's archive of whole folders was 672 MB)
collect() {  # collect NAME FOLDER: one archive of FOLDER's small files
    (cd /tmp && find "$2" -type f \( -name '*.json' -o -name '*.log' -o -name '*.txt' -o -name '*.md' \
        -o -name '*.ipynb' \) -size -4M | tar -czf "$OUT/$1.tgz" -T -)
}
collect gpu gpu
collect studio4 studio4
ls -la "$OUT"
tail -n 25 "$OUT/suite.log"
grep -E "passed|FAILED|failed|lab [0-9]" "$OUT/studio4.log" | tail -n 12
