#!/usr/bin/env bash
# GPU check for trl-efficient (docs/gpu-check.md): bf16 training, HBPO budget subgroups, 1-vs-2-GPU equality,
# DeepSpeed ZeRO-3, vLLM colocate (real weight sync) and vLLM server mode, each a few minutes under its own timeout,
# each reported as one line `PASS|FAIL|SKIP <name>: <reason>`, then a count. Exit status 1 when a check failed.
#
# Usage:   bash scripts/gpu_check.sh [--only CHECK ...] [--timeout SECONDS] [--workdir DIR]
#          MODEL=<hub id or local dir> bash scripts/gpu_check.sh      (default: a tiny model built offline)
# Needs beyond torch: this package (`pip install -e .` here, or the wheel); optional deepspeed and vllm<=0.31.
# Without MODEL nothing is downloaded (HF_HUB_OFFLINE=1): the model is built in-process, the data is synthetic.
# PYTHON selects the interpreter (default: python3 on PATH).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
if [ -z "${MODEL:-}" ]; then
  export HF_HUB_OFFLINE=1
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"  # check this checkout's code
exec "$PYTHON" "$ROOT/scripts/gpu_check.py" "$@"
