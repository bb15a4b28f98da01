#!/usr/bin/env bash
# How to launch trl-efficient recipes. Each line is a complete command.
set -euo pipefail

# 1. Offline smoke run on a laptop CPU (tiny random model, bundled GSM8K).
trl-efficient train

# 2. One GPU, a recipe from configs/ (vLLM colocate generation; add --use_vllm false without vLLM).
trl-efficient train --config configs/kimi.yaml

# 3. Eight GPUs with DDP, or DeepSpeed ZeRO-2 / ZeRO-3.
accelerate launch --config_file examples/accelerate/multi_gpu.yaml -m trl_efficient.cli train --config configs/kimi.yaml
accelerate launch --config_file examples/accelerate/zero2.yaml -m trl_efficient.cli train --config configs/shorter-better.yaml
accelerate launch --config_file examples/accelerate/zero3.yaml -m trl_efficient.cli train --config configs/laser.yaml --eval_before_after false

# 4. vLLM server mode: serve the policy on GPUs 6-7, train on GPUs 0-5.
#    CUDA_VISIBLE_DEVICES=6,7 trl vllm-serve --model deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B --tensor_parallel_size 2
#    CUDA_VISIBLE_DEVICES=0,1,2,3,4,5 accelerate launch --num_processes 6 -m trl_efficient.cli train \
#        --config configs/kimi.yaml --vllm_mode server

# 5. Push the result with its model card.
trl-efficient train --config configs/kimi.yaml --push_to_hub true --hub_model_id <you>/r1-1.5b-kimi
