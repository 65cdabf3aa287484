#!/usr/bin/env bash
# The main job end to end on the embedded defaults (local provider, shipped price catalog, SQLite).
# `make demo` runs it with GPUPLAN_HOME/GPUPLAN_DB pointing inside the checkout (.demo/).
set -euo pipefail
GPUPLAN=${1:-gpuplan}

step() { printf '\n\033[1m$ gpuplan %s\033[0m\n' "$*"; "$GPUPLAN" "$@"; }

step --version
step db upgrade
step db current
step prices --gpu H100 --min-gpus 8 --limit 5
step prices --gpu A100 --spot --sort price-per-tflop --limit 5

# How long and how much: the estimate (default MFU prior, prices from the shipped catalog), and what fits.
step estimate --model llama-2-7b --tokens 200B --gpu H100 --gpus 16 --sharding zero3 --global-batch 512
step estimate --params 70B --tokens 1T --gpu A100-80GB --gpus 64
step estimate --model gpt2 --tokens 10B --gpu A10G --json

# Measured throughput: real training steps of a tiny GPT on this machine's device, recorded; what was learned.
step bench --model gpt-tiny --steps 10 --warmup 2
step bench list
step calibrate --show

# Where: every offer ranked by what the whole job costs (the planner), within a 72 h deadline.
step plan --model llama-2-7b --tokens 140B --deadline 72h --limit 5

# Launch the tiny GPT on this machine (local provider), then look at the books.
step launch examples/tiny-gpt.yaml -y
step runs
RUN_ID=$("$GPUPLAN" runs --json --limit 1 | python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["run_id"])')
step status "$RUN_ID"

# The books: a monthly budget, what was spent, and a plot (issue 9).
step budget set demo-month --amount 50 --period month
step budget status
step report --by month
step report --by run --format markdown
step report --accuracy
step report --by project --plot "${GPUPLAN_HOME:-.}/spend.png"

# The measured path: bench the tiny GPT at a job's shape, then launch a job whose spec gives no throughput;
# the estimate is start-up (learned from the runs above) + tokens / the bench's tokens/s. Estimate vs actual:
OMP_NUM_THREADS=1 step bench --model gpt-tiny --seq-len 64 --micro-batch 16 --precision fp32 --steps 40
step launch examples/tiny-gpt-measured.yaml -y
step report --accuracy

# Where the demo's books are: its own database, not the one your shell uses (so `gpuplan runs` there shows none).
DB=${GPUPLAN_DB:-"(the default: see gpuplan db current)"}
printf '\n\033[1mThe demo kept its books apart from yours.\033[0m\n'
printf '  database:    %s\n' "$DB"
printf '  run folders: %s\n' "${GPUPLAN_HOME:-"(the default gpuplan home)"}"
printf '  look at it:  GPUPLAN_DB=%q GPUPLAN_HOME=%q gpuplan runs\n' "${GPUPLAN_DB:-}" "${GPUPLAN_HOME:-}"
printf '  (gpuplan is in .venv/bin: `source .venv/bin/activate` first, or call .venv/bin/gpuplan)\n'
