"""Test harness for trainer tests: scripted (deterministic) rollouts and a recording trainer.

`ScriptedGenerationMixin` replaces only the *backend* generation (`GRPOTrainer._generate_single_turn`): placed after
`EfficientGRPOTrainer` in the bases, our override (vLLM de-dup, hard caps) still runs around it. Each completion is a
pure function of (global step, global row index, prompt tokens), so one process and two processes produce the same
completions for the same global batch, and rewards/advantages can be compared exactly.
"""

from __future__ import annotations

import random

from datasets import Dataset
from trl import GRPOTrainer

from trl_efficient.trainer import EfficientGRPOConfig, EfficientGRPOTrainer

QUESTIONS = [("What is 6 * 7?", "42"), ("What is 2 + 3?", "5"), ("What is 9 - 2?", "7"), ("What is 3 * 3?", "9")]


def make_dataset(n: int = 32) -> Dataset:
    rows = [QUESTIONS[i % len(QUESTIONS)] for i in range(n)]
    return Dataset.from_dict(
        {
            "prompt": [[{"role": "user", "content": q}] for q, _ in rows],
            "solution": [a for _, a in rows],
            "idx": list(range(n)),
        }
    )


def scripted_text(step: int, global_index: int, prompt_ids) -> str:
    rng = random.Random(f"{step}:{global_index}:{sum(prompt_ids)}:{len(prompt_ids)}")
    filler = " ".join(rng.choice(["step", "check", "so", "then", "wait"]) for _ in range(rng.randint(0, 12)))
    answer = rng.choice(["42", "5", "7", "9", "11"])
    if rng.random() < 0.15:
        return f"<think> {filler}"  # never closes: a truncated-looking, unanswered completion
    return f"<think> {filler} </think> The final answer is \\boxed{{{answer}}}"


class ScriptedGenerationMixin(GRPOTrainer):
    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        start = self.accelerator.process_index * len(prompt_ids)
        eos = self.processing_class.eos_token_id
        completions = []
        for i, ids in enumerate(prompt_ids):
            text = scripted_text(self.state.global_step, start + i, ids)
            tokens = self.processing_class(text, add_special_tokens=False)["input_ids"]
            completions.append(tokens + ([eos] if "</think>" in text else []))
        return completions, None


class RowScriptedMixin(GRPOTrainer):
    """Scripted rollouts keyed by a row's global position in the generation batch (process index x the rows each
    process generates + the rows before it on this process), however the rows are split into calls
    (`ScriptedGenerationMixin` restarts its index at every call); records the rows of each call in `calls`."""

    def _generate_and_score_completions(self, inputs):
        rows = self.args.per_device_train_batch_size * self.args.steps_per_generation
        self.next_row = self.accelerator.process_index * rows if self.model.training else 0
        return super()._generate_and_score_completions(inputs)

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        self.calls = getattr(self, "calls", []) + [len(prompt_ids)]
        eos = self.processing_class.eos_token_id
        completions = []
        for ids in prompt_ids:
            text = scripted_text(self.state.global_step, self.next_row, ids)
            self.next_row += 1
            tokens = self.processing_class(text, add_special_tokens=False)["input_ids"]
            completions.append(tokens + ([eos] if "</think>" in text else []))
        return completions, None


class RecordingMixin(EfficientGRPOTrainer):
    """Records, per generation batch, the gathered rewards and this process's advantages and masks."""

    def __init__(self, *args, **kwargs):
        self.records = []
        super().__init__(*args, group_stages=[self._record_batch], **kwargs)

    def _record_batch(self, batch, trainer):
        self.records.append(
            {"rewards": batch.rewards.tolist(), "lengths": batch.lengths.tolist(), "metadata": batch.metadata}
        )

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        self.records[-1]["advantages"] = out["advantages"].tolist()
        self.records[-1]["completion_mask_sums"] = out["completion_mask"].sum(1).tolist()
        self.records[-1]["num_items_in_batch"] = float(out["num_items_in_batch"])
        self.records[-1]["prompts_decoded"] = [
            self.processing_class.decode([t for t, m in zip(ids, mask) if m])
            for ids, mask in zip(out["prompt_ids"].tolist(), out["prompt_mask"].tolist())
        ]
        return out


def tiny_config(output_dir, **overrides) -> EfficientGRPOConfig:
    kwargs = dict(
        output_dir=str(output_dir),
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=48,
        max_steps=2,
        learning_rate=1e-3,
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        bf16=False,
        activation_checkpointing=False,
        save_strategy="no",
        seed=0,
        beta=0.0,
    )
    kwargs.update(overrides)
    return EfficientGRPOConfig(**kwargs)


class RecordingTrainer(RecordingMixin, ScriptedGenerationMixin):
    """Recording trainer with scripted (deterministic) rollouts."""


class RealRecordingTrainer(RecordingMixin):
    """Recording trainer with real transformers generation."""


def resume_trainer(model_dir, output_dir, tokenizer, max_steps, peft_config=None, **overrides):
    """The resume tests' run (tests/trainer/test_resume*.py): real sampled generation on 3 prompts (the prompt history
    sees each prompt again), a target-length rollout plan, correctness + Kimi's length reward, a checkpoint every 2
    steps. `overrides` go to `tiny_config`; `peft_config` to the trainer."""
    from trl_efficient.rewards import correctness_reward, get_kimi_length_reward

    args = tiny_config(
        output_dir,
        **{
            "max_steps": max_steps,
            "save_strategy": "steps",
            "save_steps": 2,
            "track_prompt_history": True,
            "rollout_plan": "target_length",
            "target_length_range": [5, 40],
            "learning_rate": 1e-2,
            "generation_kwargs": {"sequence_bias": [[[tokenizer.eos_token_id], 3.0]]},
            **overrides,
        },
    )
    return RealRecordingTrainer(
        model=model_dir,
        reward_funcs=[correctness_reward, get_kimi_length_reward(warmup_ratio=0.0)],
        args=args,
        train_dataset=make_dataset(3),
        peft_config=peft_config,
    )


def tiny_cli_args(output_dir, **extra) -> list[str]:
    """Command-line overrides that make any recipe YAML train in seconds on the tiny offline model."""
    args = {
        "model_name_or_path": "tiny:qwen2-16",
        "output_dir": str(output_dir),
        "max_steps": 2,
        "per_device_train_batch_size": 4,
        "num_generations": 4,
        "max_completion_length": 24,
        "dataset_limit": 16,
        "eval_before_after": False,
        "use_vllm": False,
        "bf16": False,
        "use_cpu": True,
        "activation_checkpointing": False,
        "gradient_accumulation_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "eos_logit_bias": 3.0,
        "logging_steps": 1,
    }
    args.update(extra)
    out = []
    for key, value in args.items():
        out += [f"--{key}", str(value)]
    return out


def _start_torchrun(script: str, nproc: int, out_dir, args):
    import os
    import subprocess
    import sys

    os.makedirs(out_dir, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc), script]
    cmd += [str(a) for a in args]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish_torchrun(proc, nproc: int, out_dir, timeout: int) -> list[dict]:
    import json
    import os

    try:
        _, stderr = proc.communicate(timeout=timeout)
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    assert proc.returncode == 0, stderr[-4000:]
    ranks = []
    for r in range(nproc):
        with open(os.path.join(out_dir, f"rank{r}.json")) as f:
            ranks.append(json.load(f))
    return ranks


def run_torchrun(script: str, nproc: int, out_dir, *args, timeout: int = 300) -> list[dict]:
    """Run `script` under `torchrun --standalone --nproc_per_node nproc` (CPU, gloo) and load each rank's
    `rank{r}.json` from `out_dir`."""
    return _finish_torchrun(_start_torchrun(script, nproc, out_dir, args), nproc, out_dir, timeout)


def run_one_and_two(script: str, model_dir, out_dir, *extra, timeout: int = 300) -> tuple[dict, list[dict]]:
    """`script MODEL_DIR OUT/one *extra` under torchrun with 1 process and `script MODEL_DIR OUT/two *extra` with 2,
    both at once (each torchrun spends most of its time importing, so the single run overlaps the pair's start-up);
    returns `(single process's record, [rank 0's, rank 1's])`. The runs are independent processes: running them
    together changes no number."""
    one, two = out_dir / "one", out_dir / "two"
    started = [
        (_start_torchrun(script, 1, one, (model_dir, one, *extra)), 1, one),
        (_start_torchrun(script, 2, two, (model_dir, two, *extra)), 2, two),
    ]
    try:
        (single,), ranks = (_finish_torchrun(proc, n, out, timeout) for proc, n, out in started)
    finally:
        for proc, _, _ in started:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    return single, ranks


def finish_distributed() -> None:
    """End a torchrun worker once its `rank{r}.json` is written: wait for every rank, destroy the process group, and
    leave with `os._exit(0)`.

    The exit skips interpreter finalisation on purpose. A gloo group (or a DDP reducer still holding it) torn down by
    C++ static destructors at interpreter exit can abort a rank with "terminate called without an active exception"
    (SIGABRT) after all its work is done: seen twice on the 1-process run of the solve-rate test (once in CI) and once
    in CI on the whole-group reward worker (`tests/rewards/dist_group_worker.py`), never reproduced alone. Every
    torchrun worker of the suite ends here. Nothing is left to finalise: the results are on disk and the streams are
    flushed first."""
    import gc
    import os
    import sys

    import torch.distributed as dist

    gc.collect()  # drop the trainer and its DDP reducer while the group still exists
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def group_batch(rewards, lengths, group_size, truncated=None):
    """A one-reward `GroupBatch` for estimator and filter tests."""
    import torch

    from trl_efficient.trainer import GroupBatch

    n = len(rewards)
    return GroupBatch(
        rewards=torch.tensor(rewards, dtype=torch.float32).view(n, 1),
        reward_names=["r"],
        reward_weights=torch.ones(1),
        lengths=torch.tensor(lengths, dtype=torch.float32),
        truncated=torch.tensor(truncated or [False] * n),
        group_size=group_size,
    )


def recipe_yaml_settings(name) -> dict:
    """What `configs/<name>.yaml` runs with before any command-line override: its run preset (`run_defaults`), the
    recipe's `config_overrides`, then the YAML's keys on top (the CLI's precedence), as plain values."""
    import os

    import yaml

    from trl_efficient.recipes import get_recipe
    from trl_efficient.recipes.presets import run_preset

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "configs", f"{name}.yaml")) as f:
        raw = yaml.safe_load(f)
    return {**run_preset(raw.get("run_defaults")), **get_recipe(raw.get("recipe", name)).config_overrides, **raw}


def profile_with_cli(path, max_new_tokens: int = 16) -> str:
    """Run `trl-efficient profile` (SABER's base-model profile) on 16 GSM8K rows with the tiny model; returns `path`."""
    from trl_efficient.cli import main

    argv = ["profile", "--model_name_or_path", "tiny:qwen2-16", "--dataset_name", "gsm8k", "--dataset_limit", "16",
            "--output", str(path), "--max_new_tokens", str(max_new_tokens), "--batch_size", "8",
            "--eos_logit_bias", "3.0"]  # fmt: skip
    assert main(argv) == 0
    return str(path)


def train_yaml(name, tmp_path, **cli):
    """Train 2 steps from configs/<name>.yaml on the tiny offline model; dict overrides go as JSON on the CLI.
    Returns the parsed config."""
    import json
    import os

    from trl_efficient.api.training import parse_train_args, train_main

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cli = {"max_completion_length": 12, **{k: json.dumps(v) if isinstance(v, dict) else v for k, v in cli.items()}}
    argv = ["--config", os.path.join(root, "configs", f"{name}.yaml"), *tiny_cli_args(tmp_path, **cli)]
    _, _, config = parse_train_args(argv)
    train_main(argv)
    with open(os.path.join(tmp_path, "trl_efficient_summary.json")) as f:
        assert json.load(f)["recipe"] == name
    return config


def gold_scripted_generation(monkeypatch, cap: int) -> list:
    """Replace the backend generation (`GRPOTrainer._generate_single_turn`) of every trainer with scripted completions
    that answer the row's gold about half the time, with a thinking part of varying length (some blank-line steps,
    some never closed), so that every reward has something to tell apart; record every gathered batch's rewards
    (`EfficientGRPOTrainer.group_stage`). Returns the list the `(B, F)` reward rows are appended to, one entry per
    generation batch, with the reward names."""
    from trl_efficient.core.answers import _gold_text, extract_boxed

    records = []
    generate_and_score = EfficientGRPOTrainer._generate_and_score_completions
    group_stage = EfficientGRPOTrainer.group_stage

    def remember_solutions(self, inputs):
        self._scripted_solutions = [row.get("solution") for row in inputs]
        return generate_and_score(self, inputs)

    def scripted(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        eos, out = self.processing_class.eos_token_id, []
        for i, ids in enumerate(prompt_ids):
            rng = random.Random(f"{self.state.global_step}:{i}:{sum(ids)}:{len(ids)}")
            solution = self._scripted_solutions[i % len(self._scripted_solutions)]
            gold = extract_boxed(str(solution)) or _gold_text(solution)
            answer = gold if rng.random() < 0.5 else "-98765"  # a wrong answer no gold here equals
            words = [rng.choice(["step", "check", "so", "then", "wait"]) for _ in range(rng.randint(0, 10))]
            words = [w if rng.random() < 0.7 else f"{w}.\n\n" for w in words]
            unclosed = rng.random() < 0.1
            if rng.random() < 0.2:  # an over-thinker: runs to the cap, truncated (overlong rewards see it)
                words, unclosed = words + ["wait"] * cap, True
            while True:  # drop filler words until the answer fits under the cap (golds can be long)
                filler = " ".join(words)
                text = f"<think> {filler}" if unclosed else f"<think> {filler} </think> \\boxed{{{answer}}}"
                tokens = self.processing_class(text, add_special_tokens=False)["input_ids"]
                if len(tokens) < cap or not words:
                    break
                words.pop()
            tokens = tokens[:cap]
            out.append(tokens + ([eos] if "</think>" in text and len(tokens) < cap else []))
        return out, None

    def record(self, batch, output):
        records.append({"names": list(self.reward_func_names), "rewards": batch.rewards.tolist()})
        return group_stage(self, batch, output)

    monkeypatch.setattr(EfficientGRPOTrainer, "_generate_and_score_completions", remember_solutions)
    monkeypatch.setattr(GRPOTrainer, "_generate_single_turn", scripted)
    monkeypatch.setattr(EfficientGRPOTrainer, "group_stage", record)
    return records
