"""`trl-efficient` command line: `train` (default recipe run), `recipes` (list them; `--markdown` prints the README's
recipe and reward tables generated from the registry).

`trl-efficient train --config configs/<recipe>.yaml [--key value ...]` parses three dataclasses with TRL's
`TrlParser` (YAML keys and `--flags` are their field names): `TrainArguments` (below), `DataArguments` and
`EfficientGRPOConfig`. The recipe's own config overrides are applied first, then the YAML, then the command line.
With no arguments, `trl-efficient train` runs the bundled `configs/quickstart.yaml`: an offline smoke run of the whole
pipeline on CPU, on the testbed's over-thinking base model. The same entry point runs under `accelerate launch -m
trl_efficient.cli train ...`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from dataclasses import dataclass, field
from importlib import resources

logger = logging.getLogger("trl_efficient")

QUICKSTART_NOTE = (
    "This is a SMOKE RUN of the whole pipeline (data -> rollouts -> length-aware rewards -> GRPO updates -> "
    "checkpoint -> model card -> evaluation) on a tiny model built offline, on CPU. With the default quickstart the "
    "model is the testbed's over-thinking base (trained from scratch on synthetic arithmetic traces): the numbers "
    "show a method's effect in that small world, not on real benchmarks. Real runs: a recipe config from configs/ "
    "with --model_name_or_path <hub id>."
)


@dataclass
class TrainArguments:
    """Script options of `trl-efficient train` (not part of the trainer config)."""

    recipe: str = field(default="grpo", metadata={"help": "Recipe name (see `trl-efficient recipes`)."})
    model_name_or_path: str = field(
        default="tiny:qwen2",
        metadata={
            "help": "Hub id or local path of the policy; 'tiny:<arch>[-<hidden>]' builds a random model offline."
        },
    )
    recipe_kwargs: dict | str | None = field(
        default=None,
        metadata={
            "help": "Keyword arguments of the recipe's dataset preparation (e.g. SABER's profile path); a JSON "
            "object on the command line."
        },
    )
    eos_logit_bias: float | None = field(
        default=None,
        metadata={"help": "Add this bias to the EOS logit in transformers generation (tiny random models only)."},
    )
    eval_before_after: bool = field(
        default=True,
        metadata={"help": "Evaluate accuracy and mean tokens on the eval dataset before and after training."},
    )
    eval_max_new_tokens: int | None = field(
        default=None, metadata={"help": "Max new tokens at evaluation (default: max_completion_length)."}
    )
    smoke_run: bool = field(
        default=False, metadata={"help": "Print the smoke-run notice (quickstart and smoke configs)."}
    )

    def __post_init__(self) -> None:
        if isinstance(self.recipe_kwargs, str):
            try:
                self.recipe_kwargs = json.loads(self.recipe_kwargs)
            except json.JSONDecodeError as err:
                raise ValueError(f"recipe_kwargs must be a JSON object, got {self.recipe_kwargs!r}: {err}") from err
        if self.recipe_kwargs is not None and not isinstance(self.recipe_kwargs, dict):
            raise ValueError(f"recipe_kwargs must be a mapping, got {self.recipe_kwargs!r}.")


def packaged_config(name: str) -> str:
    """Path of `configs/<name>.yaml`, from the working directory's `configs/` if present, else the package's."""
    local = os.path.join("configs", f"{name}.yaml")
    if os.path.exists(local):
        return local
    return str(resources.files("trl_efficient.recipes").joinpath("configs", f"{name}.yaml"))


def _prescan_recipe(argv: list[str]) -> str | None:
    import yaml

    if "--recipe" in argv:
        return argv[argv.index("--recipe") + 1]
    for arg in argv:
        if arg.startswith("--recipe="):
            return arg.split("=", 1)[1]
    if "--config" in argv:
        with open(argv[argv.index("--config") + 1]) as f:
            return (yaml.safe_load(f) or {}).get("recipe")
    return None


def parse_train_args(argv: list[str]) -> tuple:
    from trl import TrlParser

    from .data.loaders import DataArguments
    from .recipes import get_recipe
    from .trainer import EfficientGRPOConfig

    parser = TrlParser((TrainArguments, DataArguments, EfficientGRPOConfig), prog="trl-efficient train")
    recipe_name = _prescan_recipe(argv)
    if recipe_name is not None:
        parser.set_defaults_with_config(**get_recipe(recipe_name).config_overrides)
    return parser.parse_args_and_config(argv)


def run_training(script_args: TrainArguments, data_args, training_args) -> dict:
    """Build everything from parsed arguments, train, save, evaluate, and return the summary dict."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .core.models import resolve_model_name
    from .eval.evaluate import evaluate_model
    from .recipes import get_recipe
    from .testbed import is_testbed_model, load_datasets  # defers to data.load_datasets for other datasets
    from .testbed.runner import torch_threads

    recipe = get_recipe(script_args.recipe)
    model_path = resolve_model_name(script_args.model_name_or_path)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    if script_args.eos_logit_bias:
        if training_args.use_vllm:
            raise ValueError("eos_logit_bias is a transformers-generate option; unset it with use_vllm=True.")
        training_args.generation_kwargs = {
            **(training_args.generation_kwargs or {}),
            "sequence_bias": [[[tokenizer.eos_token_id], float(script_args.eos_logit_bias)]],
        }
    train_dataset, eval_dataset = load_datasets(data_args, seed=training_args.seed)
    train_dataset = recipe.apply_prepare_dataset(
        train_dataset, training_args, tokenizer, **(script_args.recipe_kwargs or {})
    )
    reward_funcs, weights = recipe.build_reward_funcs(training_args, tokenizer)
    if training_args.reward_weights is None:
        training_args.reward_weights = weights
    model = AutoModelForCausalLM.from_pretrained(model_path, **(training_args.model_init_kwargs or {}))
    trainer_cls = recipe.load_trainer_cls()
    trainer = trainer_cls(
        model=model,
        reward_funcs=reward_funcs,
        args=training_args,
        train_dataset=train_dataset,
        processing_class=tokenizer,
    )
    trainer.update_card_info(  # model-card inputs (trl_efficient.model_card.ModelCardInfo)
        recipe=recipe,
        datasets=[data_args.dataset_name] + ([data_args.eval_dataset_name] if eval_dataset is not None else []),
    )
    if not os.path.isdir(script_args.model_name_or_path) and not script_args.model_name_or_path.startswith(
        ("tiny:", "testbed:")
    ):
        trainer.update_card_info(base_model_id=script_args.model_name_or_path)

    def _evaluate(tag):
        if eval_dataset is None or not script_args.eval_before_after:
            return None
        result = None
        if trainer.accelerator.is_main_process:
            unwrapped = trainer.accelerator.unwrap_model(trainer.model)
            gen_kwargs = {k: v for k, v in (training_args.generation_kwargs or {}).items() if k == "sequence_bias"}
            result = evaluate_model(
                unwrapped,
                tokenizer,
                eval_dataset,
                max_new_tokens=script_args.eval_max_new_tokens or training_args.max_completion_length,
                generation_kwargs=gen_kwargs,
                chat_template_kwargs=training_args.chat_template_kwargs,
                seed=training_args.seed,
                description=f"eval ({tag})",
            ).to_dict()
        trainer.accelerator.wait_for_everyone()
        return result

    # Tiny testbed matrices: one torch thread is faster than two threads waiting on each other (testbed/runner.py).
    threads = torch_threads() if is_testbed_model(script_args.model_name_or_path) else contextlib.nullcontext()
    with threads:
        before = _evaluate("before training")
        trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
        after = _evaluate("after training")
    summary = {"recipe": recipe.name, "model": script_args.model_name_or_path, "before": before, "after": after}
    if before and after:
        trainer.update_card_info(summary=_summary_markdown(summary))
    # Nothing lost: the weights, tokenizer and summary are on disk before any extra (card, push) runs; an extra
    # that fails is reported by name afterwards, with the model already safe.
    trainer.save_model(training_args.output_dir)
    if trainer.accelerator.is_main_process:
        with open(os.path.join(training_args.output_dir, "trl_efficient_summary.json"), "w") as f:
            json.dump(summary, f, indent=1)
        trainer.create_model_card(model_name=os.path.basename(os.path.normpath(training_args.output_dir)))
        _print_summary(summary, training_args.output_dir, script_args.smoke_run, trainer.model_card_error is None)
        if trainer.model_card_error is not None:
            raise ExtraFailedError("model card (README.md)", training_args.output_dir, trainer.model_card_error)
    if training_args.push_to_hub:
        try:
            trainer.push_to_hub()
        except Exception as exc:
            raise ExtraFailedError("push to the Hub", training_args.output_dir, exc) from exc
    return summary


class ExtraFailedError(RuntimeError):
    """An extra after training (model card, push) failed; the trained model is already saved in `output_dir`."""

    def __init__(self, extra: str, output_dir: str, cause: BaseException) -> None:
        self.extra, self.output_dir, self.cause = extra, output_dir, cause
        super().__init__(
            f"{extra} failed ({type(cause).__name__}: {cause}); the trained model and its checkpoints are saved in "
            f"{output_dir}"
        )


def _summary_markdown(summary: dict) -> str:
    b, a = summary["before"], summary["after"]
    return (
        "### Evaluation before and after training\n\n"
        "| | accuracy | mean tokens | truncated |\n|---|---|---|---|\n"
        f"| before | {b['accuracy']:.3f} | {b['mean_tokens']:.1f} | {b['truncated_fraction']:.2f} |\n"
        f"| after | {a['accuracy']:.3f} | {a['mean_tokens']:.1f} | {a['truncated_fraction']:.2f} |\n"
    )


def _print_summary(summary: dict, output_dir: str, smoke_run: bool, card_written: bool = True) -> None:
    lines = ["", "=" * 78, f"trl-efficient: recipe '{summary['recipe']}' on {summary['model']}"]
    if summary["before"] and summary["after"]:
        b, a = summary["before"], summary["after"]
        lines += [
            f"  accuracy     : {b['accuracy']:.3f} -> {a['accuracy']:.3f}   (n={a['num_samples']})",
            f"  mean tokens  : {b['mean_tokens']:.1f} -> {a['mean_tokens']:.1f}",
            f"  truncated    : {b['truncated_fraction']:.2f} -> {a['truncated_fraction']:.2f}",
        ]
        if "redundant_share" in (a.get("extra") or {}):
            lines.append(
                f"  redundant    : {b['extra']['redundant_share']:.3f} -> {a['extra']['redundant_share']:.3f}"
                f"   (share of filler tokens; floor = {a['extra'].get('floor_tokens', float('nan')):.1f} tokens)"
            )
    saved = "checkpoint, model card (README.md) and summary" if card_written else "checkpoint and summary"
    lines += [f"  {saved} saved to {output_dir}"]
    if smoke_run:
        lines += ["", QUICKSTART_NOTE]
    lines += ["=" * 78]
    print("\n".join(lines))


def train_main(argv: list[str] | None = None) -> dict:
    argv = list(sys.argv[2:] if argv is None else argv)
    if not argv:
        argv = ["--config", packaged_config("quickstart")]
    script_args, data_args, training_args = parse_train_args(argv)
    return run_training(script_args, data_args, training_args)


def list_recipes() -> None:
    from .recipes import RECIPES

    for name in RECIPES.names():
        recipe = RECIPES.get(name)
        print(f"{name:18s} {recipe.method}: {recipe.description}")


# Subcommand -> (help, "module:function"). Each function takes the remaining argv and returns an exit code
# (or None). Modules are imported only when their command runs, so `trl-efficient --help` stays fast.
COMMANDS = {
    "train": ("train a recipe (default: the offline quickstart)", "trl_efficient.cli:train_main"),
    "recipes": ("list the registered recipes (--markdown: the README tables)", "trl_efficient.cli:recipes_main"),
    "eval": ("evaluate accuracy and tokens of a model on benchmarks", "trl_efficient.eval.cli:main"),
    "data": ("data utilities: `data prepare` writes benchmarks to local files", "trl_efficient.data.cli:main"),
    "testbed": ("CPU testbed: compare recipes on a synthetic over-thinking world", "trl_efficient.testbed.cli:main"),
    "serve-scorer": ("serve a token-significance scorer over HTTP (Bingo)", "trl_efficient.significance.server:main"),
    "profile": ("profile a base model over a dataset (SABER tiers)", "trl_efficient.methods.saber:profile_main"),
    "push": ("upload a trained output directory (model, tokenizer, card, evaluation) to the Hub", "trl_efficient.hub.push:main"),
    "merge": ("merge models: base/trained averaging, layer-wise, DLER update-selective, LoRA into base", "trl_efficient.hub.merge:main"),
}


def recipes_main(argv: list[str]) -> int:
    """`trl-efficient recipes [--markdown | --update-readme README.md | --check-readme README.md]`."""
    parser = argparse.ArgumentParser(prog="trl-efficient recipes", description="List the registered recipes.")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--markdown", action="store_true", help="print the README's recipe and reward tables")
    group.add_argument("--update-readme", metavar="PATH", help="rewrite the generated tables between their markers")
    group.add_argument(
        "--check-readme", metavar="PATH", help="exit 1 when the README's tables differ from the registry"
    )
    args = parser.parse_args(argv)
    if not (args.markdown or args.update_readme or args.check_readme):
        list_recipes()
        return 0
    from .recipes import tables

    if args.markdown:
        print(tables.markdown(), end="")
        return 0
    path = args.update_readme or args.check_readme
    with open(path, encoding="utf-8") as f:
        text = f.read()
    updated = tables.update_readme(text)
    if args.check_readme:
        if updated != text:
            print(
                f"{path}: the recipe/reward tables differ from the registry; run "
                f"`trl-efficient recipes --update-readme {path}`",
                file=sys.stderr,
            )
            return 1
        return 0
    if updated != text:
        with open(path, "w", encoding="utf-8") as f:
            f.write(updated)
    return 0


def _resolve(target: str):
    import importlib

    module, _, func = target.partition(":")
    return getattr(importlib.import_module(module), func)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        parser = argparse.ArgumentParser(prog="trl-efficient", description="Efficient-reasoning RL on top of TRL.")
        parser.add_argument(
            "command", choices=sorted(COMMANDS), help="; ".join(f"{k}: {v[0]}" for k, v in sorted(COMMANDS.items()))
        )
        parser.parse_args(argv[:1] or ["--help"])  # prints help, or the error listing the commands
        return 2
    try:
        result = _resolve(COMMANDS[argv[0]][1])(argv[1:])
    except ExtraFailedError as err:  # the model is saved; say which extra failed, in one line, and exit non-zero
        print(f"trl-efficient: error: {err}", file=sys.stderr)
        return 1
    return 0 if result is None or isinstance(result, dict) else int(result)


if __name__ == "__main__":
    sys.exit(main())
