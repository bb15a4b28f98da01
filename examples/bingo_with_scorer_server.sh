#!/usr/bin/env bash
# Bingo with the significance scorer (LLMLingua-2) served from its own GPU, and GRPO training against it.
#
#   bash examples/bingo_with_scorer_server.sh                    # scorer on GPU 7, training on GPUs 0-6
#   SCORER_GPU=3 TRAIN_GPUS=0,1,2 bash examples/bingo_with_scorer_server.sh --max_steps 100
#   SMOKE=1 bash examples/bingo_with_scorer_server.sh            # offline CPU smoke run (tiny models, 2 steps)
#
# Why a server: in-process scoring (the default) keeps a copy of the 560M-parameter XLM-R classifier on every
# training GPU. The server puts one copy on a spare GPU (or another host: set SCORER_HOST/--host and a token) and the
# training processes score over HTTP, batched, with retries; if the server dies the run stops with an error naming
# its URL (or falls back in-process with TRL_EFFICIENT_BINGO_KWARGS='{"on_scorer_error": "fallback",
# "fallback_scorer": "<checkpoint>"}').
#
# Environment knobs (all optional):
#   SCORER_MODEL   checkpoint dir or Hub name  (default microsoft/llmlingua-2-xlm-roberta-large-meetingbank)
#   SCORER_GPU     GPU of the scorer (default 7)        TRAIN_GPUS  GPUs of the trainer (default 0,1,2,3,4,5,6)
#   PORT           scorer port (default 8765)           SCORER_HOST bind address (default 127.0.0.1: this host only)
#   TRL_EFFICIENT_SCORER_TOKEN  bearer token shared by server and client (default: a fresh random one)
# Extra arguments go to `trl-efficient train` (e.g. --max_steps 100 --output_dir outputs/bingo-run).
set -euo pipefail

PORT=${PORT:-8765}
SCORER_HOST=${SCORER_HOST:-127.0.0.1}
WORK=$(mktemp -d)
export TRL_EFFICIENT_SCORER_TOKEN=${TRL_EFFICIENT_SCORER_TOKEN:-$(python -c 'import secrets; print(secrets.token_hex(16))')}

if [[ "${SMOKE:-0}" == "1" ]]; then
  # Offline smoke run: a tiny random LLMLingua-2-format classifier on CPU, the tiny Qwen2 policy, 2 steps.
  SCORER_MODEL="$WORK/tiny-bert-base-multilingual-cased"
  python -c "from trl_efficient.testing.scorers import save_tiny_token_classifier as s; s('$SCORER_MODEL')"
  SERVE_ARGS=(--device cpu)
  PORT=0  # any free port
  TRAIN=(trl-efficient train --config bingo --model_name_or_path tiny:qwen2-16 --max_steps 2
         --per_device_train_batch_size 4 --num_generations 4 --max_completion_length 24 --dataset_limit 16
         --eval_before_after false --use_vllm false --bf16 false --use_cpu true --save_strategy no
         --eos_logit_bias 3.0 --logging_steps 1 --output_dir "$WORK/out")
  export TRL_EFFICIENT_BINGO_KWARGS='{"reference_samples": 2, "schedule_start": 1, "schedule_window": 2}'
else
  SCORER_MODEL=${SCORER_MODEL:-microsoft/llmlingua-2-xlm-roberta-large-meetingbank}
  SERVE_ARGS=(--device cuda:0 --batch-size 64)
  export CUDA_VISIBLE_DEVICES_SCORER=${SCORER_GPU:-7}
  TRAIN_GPUS=${TRAIN_GPUS:-0,1,2,3,4,5,6}
  NUM_PROCESSES=$(awk -F, '{print NF}' <<< "$TRAIN_GPUS")
  TRAIN=(env CUDA_VISIBLE_DEVICES="$TRAIN_GPUS" accelerate launch --num_processes "$NUM_PROCESSES"
         -m trl_efficient.cli train --config bingo)
fi

# 1. Start the scorer server (the token comes from TRL_EFFICIENT_SCORER_TOKEN) and stop it when this script exits.
CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES_SCORER:-} trl-efficient serve-scorer --model "$SCORER_MODEL" \
  --host "$SCORER_HOST" --port "$PORT" --port-file "$WORK/port" "${SERVE_ARGS[@]}" &
SCORER_PID=$!
trap 'kill "$SCORER_PID" 2>/dev/null || true; wait "$SCORER_PID" 2>/dev/null || true; rm -rf "$WORK"' EXIT

# 2. Wait until it answers /health (model download and load can take a while).
for _ in $(seq 1 600); do
  if [[ -s "$WORK/port" ]]; then
    URL="http://127.0.0.1:$(cat "$WORK/port")"
    if python -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + '/health', timeout=2)" "$URL" \
        2>/dev/null; then
      break
    fi
  fi
  kill -0 "$SCORER_PID" 2>/dev/null || { echo "scorer server exited; see its log above" >&2; exit 1; }
  sleep 1
done
[[ -n "${URL:-}" ]] || { echo "scorer server did not come up" >&2; exit 1; }
echo "scorer ready at $URL"

# 3. Train against it: the bingo recipe's reward reads the scorer URL from TRL_EFFICIENT_BINGO_SCORER.
TRL_EFFICIENT_BINGO_SCORER="$URL" "${TRAIN[@]}" "$@"
