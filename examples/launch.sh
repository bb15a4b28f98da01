#!/usr/bin/env bash
# How to launch trl-efficient recipes: `bash examples/launch.sh SECTION` runs one command; with no SECTION it lists
# them. Recipes are named as they ship in the package (`trl-efficient recipes` lists them, `trl-efficient recipes
# show kimi` prints one's YAML), so every `--config NAME` works from any directory after `pip install`. The
# accelerate YAMLs are in examples/accelerate/ (next to this script).
#
#   bash examples/launch.sh SECTION [--key value ...]   # extra arguments go to `trl-efficient train`
#   SMOKE=1 bash examples/launch.sh SECTION    # the same command on a tiny offline model, 1 step, on CPU
#                                              # (the test suite runs every section that can run on CPU this way)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SMOKE_ARGS=()
if [[ "${SMOKE:-0}" == "1" ]]; then
  SMOKE_ARGS=(--model_name_or_path tiny:qwen2-16 --max_steps 1 --per_device_train_batch_size 4 --num_generations 4
              --max_completion_length 16 --dataset_limit 16 --eval_before_after false --use_vllm false --bf16 false
              --use_cpu true --eos_logit_bias 3.0 --gradient_accumulation_steps 1 --save_strategy steps --save_steps 1
              --output_dir "${OUTPUT_DIR:-$(mktemp -d)}")
fi

SECTION=${1:-}
shift $(($# > 0))  # the remaining arguments go to `trl-efficient train` (after the smoke overrides)
case "$SECTION" in
  quickstart)
    # Offline smoke run on a laptop CPU: the testbed's over-thinking base model (trained once on CPU, then cached),
    # Kimi k1.5's length reward, 40 steps, accuracy and mean tokens before/after. Same as `trl-efficient train`.
    trl-efficient train --config quickstart "${SMOKE_ARGS[@]}" "$@"
    ;;
  one-gpu)
    # One GPU, a recipe by name (vLLM colocate generation; add --use_vllm false without vLLM).
    trl-efficient train --config kimi "${SMOKE_ARGS[@]}" "$@"
    ;;
  cpu-2proc)
    # Two processes on a CPU machine (gloo). `accelerate launch --num_processes 2` alone starts ONE process where
    # there is no CUDA: the config's MULTI_GPU launcher (torchrun) starts both.
    accelerate launch --config_file "$HERE/accelerate/cpu_2proc.yaml" -m trl_efficient.cli train --config smoke \
      "${SMOKE_ARGS[@]}" "$@"
    ;;
  ddp)
    # Eight GPUs with DDP.
    accelerate launch --config_file "$HERE/accelerate/multi_gpu.yaml" -m trl_efficient.cli train --config kimi \
      "${SMOKE_ARGS[@]}" "$@"
    ;;
  zero2)
    # DeepSpeed ZeRO-2 on eight GPUs, bf16 (`pip install trl-efficient[deepspeed]`).
    accelerate launch --config_file "$HERE/accelerate/zero2.yaml" -m trl_efficient.cli train --config dler \
      "${SMOKE_ARGS[@]}" "$@"
    ;;
  zero3)
    # DeepSpeed ZeRO-3 on eight GPUs, bf16. ZeRO-3 shards the weights the before/after eval generates from: it is
    # off (refused in one line otherwise); evaluate the saved model with `trl-efficient eval`.
    accelerate launch --config_file "$HERE/accelerate/zero3.yaml" -m trl_efficient.cli train --config laser \
      --eval_before_after false "${SMOKE_ARGS[@]}" "$@"
    ;;
  zero2-cpu | zero3-cpu)
    # The same DeepSpeed YAMLs on a CPU machine: 2 processes, no bf16 (DS_ACCELERATOR=cpu; DS_BUILD_OPS=0 at install;
    # the first run compiles DeepSpeed's shared-memory op). ZeRO-3: no before/after eval, as above.
    stage=${SECTION%-cpu}
    eval_flag=(); [[ "$stage" == zero3 ]] && eval_flag=(--eval_before_after false)
    DS_ACCELERATOR=cpu accelerate launch --config_file "$HERE/accelerate/$stage.yaml" --num_processes 2 \
      --mixed_precision no -m trl_efficient.cli train --config smoke "${eval_flag[@]}" "${SMOKE_ARGS[@]}" "$@"
    ;;
  vllm-server)
    # vLLM server mode: serve the policy on GPUs 6-7, train on GPUs 0-5.
    CUDA_VISIBLE_DEVICES=6,7 trl vllm-serve --model deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B \
      --tensor_parallel_size 2 &
    CUDA_VISIBLE_DEVICES=0,1,2,3,4,5 accelerate launch --num_processes 6 -m trl_efficient.cli train \
      --config kimi --vllm_mode server
    ;;
  push)
    # Train and push the result with its model card.
    trl-efficient train --config kimi --push_to_hub true --hub_model_id "${HUB_MODEL_ID:?set HUB_MODEL_ID=<you>/<repo>}"
    ;;
  *)
    echo "usage: [SMOKE=1] bash examples/launch.sh SECTION" >&2
    echo "  CPU:  quickstart, cpu-2proc, zero2-cpu, zero3-cpu (DeepSpeed installed)" >&2
    echo "  GPU:  one-gpu, ddp, zero2, zero3, vllm-server, push" >&2
    exit 2
    ;;
esac
