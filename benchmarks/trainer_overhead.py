"""Training-step time of `EfficientGRPOTrainer` with a length recipe vs plain TRL `GRPOTrainer`, side by side.

    python benchmarks/trainer_overhead.py [--recipe kimi] [--steps 6] [--rounds 3] [--model tiny:qwen2] [--json out.json]

Both trainers get the same model weights, data, seed, generation settings (transformers `generate`, an EOS logit
bias so the tiny random model stops at varied lengths) and the **same reward functions with the same weights**
(the recipe's reward specs, built by `build_rewards`: group rewards such as Kimi's get `num_generations` and
gather whole groups themselves, so they work in the plain trainer too). The only difference is the trainer class (and the recipe's
config overrides, e.g. DLER's advantage estimator and filter, which only `EfficientGRPOTrainer` reads).

To cancel machine noise the two alternate: `--rounds` rounds of (plain: `--steps` steps, efficient: `--steps`
steps), each from a fresh copy of the model; the first step of every run is a warm-up and is not timed. Reported:
median seconds per optimizer step of each trainer, the ratio efficient / plain, and the mean completion length of
each (equal lengths mean both did the same work: with `advantage_estimator: grpo` the two runs are numerically
identical).

Not a test: numbers depend on the machine. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _timer_callback():
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.durations, self._t = [], None

        def on_step_begin(self, args, state, control, **kwargs):
            self._t = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self.durations.append(time.perf_counter() - self._t)

    return StepTimer()


def build_rewards(recipe, args, tokenizer):
    """The recipe's reward functions, with `num_generations` given to the group rewards that take it, so they also
    work in a plain `GRPOTrainer` (which passes no `group_size` column); identical objects for both trainers."""
    from trl_efficient.recipes import REWARD_BUILDERS

    funcs = []
    for spec in recipe.rewards:
        builder = REWARD_BUILDERS.get(spec.builder)
        try:
            funcs.append(builder(args, tokenizer, **{**spec.kwargs, "num_generations": args.num_generations}))
        except TypeError:  # not a group reward
            funcs.append(builder(args, tokenizer, **spec.kwargs))
    return funcs, [spec.weight for spec in recipe.rewards]


def run_once(trainer_kind: str, recipe_name: str, model_path: str, steps: int, seed: int, eos_bias: float,
             batch: int, group: int, max_len: int, output_root: str) -> dict:  # fmt: skip
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer

    from trl_efficient.data import load_math_dataset
    from trl_efficient.recipes import get_recipe
    from trl_efficient.trainer import EfficientGRPOConfig, EfficientGRPOTrainer

    recipe = get_recipe(recipe_name)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    overrides = dict(recipe.config_overrides) if trainer_kind == "efficient" else {}
    args = EfficientGRPOConfig(
        output_dir=os.path.join(output_root, trainer_kind), max_steps=steps, per_device_train_batch_size=batch,
        num_generations=group, max_completion_length=max_len, learning_rate=1e-3, beta=0.0, temperature=1.0,
        logging_steps=steps, save_strategy="no", report_to="none", use_cpu=True, bf16=False, seed=seed,
        generation_kwargs={"sequence_bias": [[[tokenizer.eos_token_id], eos_bias]]}, disable_tqdm=True, **overrides,
    )  # fmt: skip
    rewards, weights = build_rewards(recipe, args, tokenizer)
    args.reward_weights = weights
    dataset = load_math_dataset("gsm8k", "train", limit=batch * steps * 2, seed=seed)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(model_path)
    cls = EfficientGRPOTrainer if trainer_kind == "efficient" else GRPOTrainer
    timer = _timer_callback()
    trainer = cls(model=model, reward_funcs=rewards, args=args, train_dataset=dataset, processing_class=tokenizer,
                  callbacks=[timer])  # fmt: skip
    trainer.train()
    lengths = [h["completions/mean_length"] for h in trainer.state.log_history if "completions/mean_length" in h]
    return {"step_seconds": timer.durations[1:], "mean_length": lengths[-1] if lengths else None}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", default="kimi", help="length recipe for EfficientGRPOTrainer (default kimi)")
    parser.add_argument("--model", default="tiny:qwen2", help="tiny:<arch>[-<hidden>], testbed:base or a path")
    parser.add_argument("--steps", type=int, default=6, help="optimizer steps per run (the first is not timed)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=16, help="per-device batch (completions per step)")
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--max-completion-length", type=int, default=64)
    parser.add_argument("--eos-bias", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)

    import torch

    from trl_efficient.testbed import resolve_model_name

    model_path = resolve_model_name(args.model)
    times = {"plain": [], "efficient": []}
    lengths = {"plain": [], "efficient": []}
    with tempfile.TemporaryDirectory() as root:
        for r in range(args.rounds):
            for kind in ("plain", "efficient"):
                out = run_once(kind, args.recipe, model_path, args.steps, args.seed, args.eos_bias, args.batch,
                               args.group, args.max_completion_length, root)  # fmt: skip
                times[kind] += out["step_seconds"]
                lengths[kind].append(out["mean_length"])
                print(f"round {r + 1}/{args.rounds} {kind:9s}: median step {statistics.median(out['step_seconds']):.3f} s, "
                      f"mean completion length {out['mean_length']}", flush=True)  # fmt: skip
    plain, eff = statistics.median(times["plain"]), statistics.median(times["efficient"])
    result = {
        "recipe": args.recipe, "model": args.model, "steps_timed_per_trainer": len(times["plain"]),
        "plain_median_step_s": round(plain, 4), "efficient_median_step_s": round(eff, 4), "ratio": round(eff / plain, 3),
        "plain_mean_lengths": lengths["plain"], "efficient_mean_lengths": lengths["efficient"],
        "batch": args.batch, "group": args.group, "max_completion_length": args.max_completion_length,
        "torch_threads": torch.get_num_threads(), "cpu_count": os.cpu_count(), "python": platform.python_version(),
        "command": "python benchmarks/trainer_overhead.py " + " ".join(argv if argv is not None else sys.argv[1:]),
    }  # fmt: skip
    print(f"\nEfficientGRPOTrainer ({args.recipe}) vs GRPOTrainer, same rewards and generation: "
          f"{eff:.3f} s vs {plain:.3f} s per step (median of {len(times['plain'])} steps each) -> ratio {eff / plain:.3f}")  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
