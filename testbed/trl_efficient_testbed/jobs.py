"""
Runs of the testbed protocol: one job = one model trained with one seed (or the base model) and evaluated, its
per-completion records written to a result file named by the hash of everything that determines it.

- `Job` / `plan_job`: a (recipe, training seed) run, or the base model's evaluation (`seed=None`), with its key: the
  protocol version, the recipe, the training seed, the settings (all but `seeds` and `max_seeds`, the number of seeds:
  adding seeds reuses the finished ones; for the base model only `EVAL_SETTINGS`), the recipe's testbed scale, its
  effective reward specs (after the scale and any sweep override), its config overrides, the base model's directory
  (which names its config hash) and the check prompts evaluated. `hash` = the first 16 hex digits of SHA-256 of the key
  as sorted JSON; the result file is `<output_dir>/runs/<recipe>/seed<s>-<hash>.json` (`runs/base/<hash>.json`), so a
  sweep point equal to the recipe as `compare` trains it is the same file, and a changed config is a new file. The file
  also names the base model by its weights (`base_model_id`, `base.base_model_id`) and the CPU kernels it ran on
  (`cpu_capability`); a file from another base's weights does not count as finished.
- `run_job`: train (`runner.train_recipe` with the training seed: it seeds the training tasks, the GRPO sampling and
  the data order), then evaluate with the evaluation seed `settings.seed` (the same tasks and the same sampling
  streams for every model: `sampling.sample_seed`), write the file atomically. A job that raises writes nothing and
  reports its error, so a rerun retries it.
- `run_jobs`: the jobs whose file is missing, on `workers` processes (multiprocessing spawn, each torch
  single-threaded; jobs that train the same model, such as `grpo` and `grpo-prompted` of one seed, are one task that
  trains it once: `training_identity`, `run_group`), the longest first (`expected_cost`); the tqdm bar over jobs gives
  the ETA; a script that calls it with workers > 1 needs the usual `if __name__ == "__main__":` guard, since spawned
  workers import the main module;
  finished jobs are skipped, so an interrupted comparison resumes where it stopped. Every job is seeded and
  self-contained: 1 and 2 workers give the same files.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)

__all__ = [
    "PROTOCOL",
    "Job",
    "load_result",
    "plan_job",
    "run_group",
    "run_job",
    "run_jobs",
    "trained_recipe",
    "training_identity",
]

PROTOCOL = 3  # bump when evaluation, records or rollouts change: every result file is then recomputed (3: the
# rollouts and evaluations decode with `decoding.FastDecoder`, whose float rounding changes training trajectories)
BASE = "base"
# the settings the base model's evaluation depends on (its key leaves out the training settings, so changing how
# recipes train does not evaluate the base model again)
EVAL_SETTINGS = ("base_model", "num_eval", "eval_samples", "max_completion_length", "eval_temperature", "eval_top_p",
                 "seed", "min_ops", "max_ops", "check_eval")  # fmt: skip


@dataclass
class Job:
    """One run: `name` (a recipe or `"base"`), its training `seed` (`None` for the base model), the settings as a
    dict, sweep `overrides` / `reward_overrides`, the result file `path`, the key's `hash` and `base_id`, the base
    model it starts from (`base.base_model_id`: its directory and the hash of its weights)."""

    name: str
    seed: int | None
    settings: dict
    key: dict
    hash: str
    path: str
    overrides: dict = field(default_factory=dict)
    reward_overrides: dict = field(default_factory=dict)
    keep_models: bool = False
    base_id: str = ""

    @property
    def label(self) -> str:
        return self.name if self.seed is None else f"{self.name} seed {self.seed}"

    def finished(self) -> bool:
        """Whether the result file exists with this job's hash (a partial write never has the name) and was computed
        from this job's base model, weights included (`base_model_id` in the file; a file from another base, e.g. one
        trained again on another CPU, is recomputed)."""
        if not os.path.isfile(self.path):
            return False
        try:
            with open(self.path) as f:
                result = json.load(f)
        except (OSError, json.JSONDecodeError):
            return False
        return result.get("hash") == self.hash and (not self.base_id or result.get("base_model_id") == self.base_id)


def config_hash(key: dict) -> str:
    """First 16 hex digits of SHA-256 of `key` as sorted JSON (non-JSON values by `str`).

    >>> config_hash({"a": 1, "b": [1, 2]}) == config_hash({"b": [1, 2], "a": 1})
    True
    """
    text = json.dumps(key, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def mode_names(name: str, settings) -> list[str]:
    """The check prompts a run evaluates: the recipe's own (`checks.check_modes`), for the base model those of every
    conditioned recipe (their checks compare with the base under the same prompts)."""
    return [m.name for m in job_modes(name, settings)]


def trained_recipe(name: str) -> str:
    """The recipe a run of `name` trains: `name` itself, or for a matching control or a row of the protocol
    (`grpo-prompted`, `grpo-cap192`, `lisa`, ...) the recipe it names (`protocol.row_spec`)."""
    from .protocol import row_spec

    return row_spec(name).get("recipe") or name


def control_overrides(name: str) -> dict:
    """The `EfficientGRPOConfig` fields a matching control or a protocol row sets (`grpo-cap192`:
    `max_completion_length` 192; `lisa`: `lisa_activated_layers` 1)."""
    from .protocol import row_spec

    return dict(row_spec(name).get("config") or {})


def row_reward_kwargs(name: str) -> dict:
    """The reward arguments a protocol row sets, `{builder: {kwarg: value}}` (protocol 10: `constant-penalty-half`'s
    alpha), merged over the recipe's scaled ones.

    >>> row_reward_kwargs("constant-penalty-half")["constant_length"]["alpha"] == 1 / 768, row_reward_kwargs("kimi")
    (True, {})
    """
    from .protocol import row_spec

    return dict(row_spec(name).get("reward_kwargs") or {})


def evaluates_conditioned(name: str) -> bool:
    """Whether a run of `name` is evaluated under every conditioned recipe's prompts: the base model, the negative
    controls and the controls evaluated "under conditioned" (the protocol), so every check can score them."""
    from .protocol import control_of, load

    return name == BASE or name in (load().get("negative_controls") or []) or (
        (control_of(name) or {}).get("evaluate_under") == "conditioned")  # fmt: skip


def job_modes(name: str, settings) -> list:
    from trl_efficient.recipes import RECIPES

    from .checks import CONDITIONED, check_modes, claim_info
    from .scaling import settings_scale

    def modes_of(recipe):
        return check_modes(recipe, settings_scale(recipe, settings))

    if not evaluates_conditioned(name):
        return modes_of(trained_recipe(name))
    # the controls leave out the prompts of a claim whose check keeps the base as its only comparator (BudgetThinker's:
    # the base with the control tokens added)
    conditioned = CONDITIONED if name == BASE else [r for r in CONDITIONED if claim_info(r).controls_evaluated]
    out = {}
    for recipe in conditioned:
        if recipe in RECIPES:
            for mode in modes_of(recipe):
                out.setdefault(mode.name, mode)
    return list(out.values())


def plan_job(name: str, seed: int | None, settings, output_dir: str, base_id: str, overrides: dict | None = None,
             reward_overrides: dict | None = None, keep_models: bool = False) -> Job:  # fmt: skip
    """The job of `name` at training seed `seed` (module docstring: its key and result file), with a protocol row's own
    settings and config when it has them (`protocol.row_settings`, `control_overrides`). `overrides` are
    `EfficientGRPOConfig` fields that differ from the recipe's testbed config (a sweep point; pass only those that
    change something, so a point equal to the recipe shares its file)."""
    from trl_efficient.recipes import get_recipe

    from .protocol import row_settings
    from .scaling import settings_scale
    from .training import scaled_recipe

    if name != BASE:  # a protocol row's own steps (protocol 4: ProRL's longer run), part of its key
        settings = row_settings(name, settings)
    settings_d = settings.to_dict()
    settings_d.pop("seeds", None)
    settings_d.pop("max_seeds", None)
    if name == BASE:
        settings_d = {k: settings_d[k] for k in EVAL_SETTINGS}
    key = {"protocol": PROTOCOL, "recipe": name, "train_seed": seed, "settings": settings_d,
           "base_model_dir": base_id.split("@")[0], "check_modes": mode_names(name, settings)}  # fmt: skip
    overrides = {**control_overrides(name), **(overrides or {})}
    # a protocol row's reward arguments (protocol 10: constant-penalty-half's alpha), under a sweep point's
    reward_overrides = {**row_reward_kwargs(name), **(reward_overrides or {})} or None
    if name != BASE:
        trains = trained_recipe(name)
        if trains != name:
            key["trains"] = trains  # a matching control: the recipe it trains
        scale = settings_scale(trains, settings)
        recipe = scaled_recipe(get_recipe(trains), scale).with_reward_kwargs(reward_overrides, "sweep point")
        key["testbed_scale"] = scale.to_dict()
        key["rewards"] = [[s.builder, s.weight, s.kwargs] for s in recipe.rewards]
        key["config_overrides"] = overrides or {}
    key = json.loads(json.dumps(key, default=str))  # as the file holds it (tuples -> lists)
    digest = config_hash(key)
    stem = digest if seed is None else f"seed{seed}-{digest}"
    path = os.path.join(output_dir, "runs", name, stem + ".json")
    return Job(name, seed, settings.to_dict(), key, digest, path, dict(overrides or {}), dict(reward_overrides or {}),
               keep_models, base_id)  # fmt: skip


def load_result(job: Job) -> dict:
    with open(job.path) as f:
        return json.load(f)


def training_identity(job: Job) -> str | None:
    """What a job's trained model depends on: its key without the recipe's row name and the check prompts it is
    evaluated under (`None` for the base model, which trains nothing). Two jobs with the same identity train the same
    model (`grpo-prompted` seed s is `grpo` seed s, evaluated under more prompts), so `run_jobs` trains it once.

    >>> a = Job("grpo", 0, {}, {"recipe": "grpo", "train_seed": 0, "check_modes": []}, "h1", "a.json")
    >>> b = Job("grpo-prompted", 0, {}, {"recipe": "grpo-prompted", "trains": "grpo", "train_seed": 0,
    ...                                  "check_modes": ["l1"]}, "h2", "b.json")
    >>> training_identity(a) == training_identity(b), training_identity(Job("base", None, {}, {}, "h", "c.json"))
    (True, None)
    """
    if job.seed is None:
        return None
    key = {k: v for k, v in job.key.items() if k not in ("recipe", "trains", "check_modes")}
    key["trained"] = job.key.get("trains") or job.key.get("recipe")
    return config_hash({"key": key, "overrides": job.overrides, "reward_overrides": job.reward_overrides})


def expected_cost(job: Job) -> float:
    """The completions a job generates in training, up to the common prompts per step: `max_steps x G`, with G the
    recipe's own (its testbed scale) or the comparison's, 0 for the base model, which trains nothing. It orders
    `run_jobs`' work, longest first, so that the last runs of a look are short and no worker waits long for the other
    (ProRL's 120 steps and BroRL's G = 128 are 3-4x a 40-step run). A config override of `num_generations` does not
    change the rows a step samples (`training.testbed_config` sizes the batch by the scale's G first: `brorl-n8` samples
    64 prompts x 8 = BroRL's 512 rows), so it is not read. Every run is seeded on its own, so the order changes no file.

    >>> job = lambda seed, steps, g=None, o=None: Job("x", seed, {"max_steps": steps, "num_generations": 8},
    ...                                               {"testbed_scale": {"num_generations": g}}, "h", "x.json", o or {})
    >>> expected_cost(job(0, 40)), expected_cost(job(0, 10, 128)), expected_cost(job(None, 40))
    (320.0, 1280.0, 0.0)
    >>> expected_cost(job(0, 10, 128, {"num_generations": 8}))  # brorl-n8: BroRL's rows, N = 8
    1280.0
    """
    if job.seed is None:
        return 0.0
    g = (job.key.get("testbed_scale") or {}).get("num_generations") or job.settings.get("num_generations") or 1
    return float(job.settings.get("max_steps") or 0) * g


def run_job(job: Job) -> dict:
    """Train (unless the base) and evaluate one job, write its result file; `{"path", "label", "seconds", "error"}`
    (`error` is `None` on success; nothing is written on failure)."""
    return run_group([job])[0]


def run_group(jobs: list[Job]) -> list[dict]:
    """`run_job` for jobs that train the same model (`training_identity`): it is trained once and each job is evaluated
    under its own check prompts, into its own file. Every run is seeded and the evaluation draws from per-(task,
    sample) streams, so each file is the one the job would write alone."""
    from .training import TestbedSettings, hub_offline, torch_threads

    t0, outs, trained = time.time(), [], {}
    for job in jobs:
        try:
            with torch_threads(), hub_offline():
                result = _run(job, TestbedSettings(**job.settings), trained)
            os.makedirs(os.path.dirname(job.path), exist_ok=True)
            tmp = job.path + f".tmp{os.getpid()}"
            with open(tmp, "w") as f:
                json.dump(result, f)
            os.replace(tmp, job.path)  # atomic: a killed run leaves no file under the final name
            error = None
        except Exception as err:  # noqa: BLE001 - one run's failure must not stop the others
            logger.exception("testbed: %s failed", job.label)
            from .training import failed_row

            error = failed_row(job.name, err)["error"]
        outs.append({"path": job.path, "label": job.label, "seconds": round(time.time() - t0, 1), "error": error})
    return outs


def _run(job: Job, settings, trained: dict | None = None) -> dict:
    """One job's result. `trained`: the model (and its training info) of an earlier job of the same group, filled by
    the first job that trains it."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trl_efficient.overthinking.base import base_model_id, resolve_base_model
    from trl_efficient.overthinking.data import load_testbed_dataset

    from .scaling import settings_scale
    from .training import evaluate_modes, evaluate_testbed, num_generations_for, train_recipe

    trained = {} if trained is None else trained
    base_path = resolve_base_model(settings.base_model)
    tokenizer = AutoTokenizer.from_pretrained(base_path)
    info, seconds, g = {}, None, None
    if job.name == BASE:
        model = AutoModelForCausalLM.from_pretrained(base_path)
    else:
        trains = trained_recipe(job.name)
        g = (job.overrides or {}).get("num_generations") or num_generations_for(
            settings_scale(trains, settings), settings
        )  # a row's own G (protocol 4: brorl-n8) wins, as it does in the trained config (`build_config`)
        if not trained:
            folder = os.path.splitext(job.path)[0]
            trained.update(train_recipe(trains, dataclasses.replace(settings, seed=job.seed), folder,
                                        overrides=job.overrides, reward_overrides=job.reward_overrides))  # fmt: skip
            if not job.keep_models:
                shutil.rmtree(folder, ignore_errors=True)
        info = dict(trained)
        model, seconds = info.pop("model"), info["seconds"]
    eval_ds = load_testbed_dataset("test", settings.num_eval, settings.seed, settings.min_ops, settings.max_ops)
    check_ds = eval_ds.select(range(min(settings.check_eval, len(eval_ds))))
    sampling = dict(max_new_tokens=settings.max_completion_length, temperature=settings.eval_temperature,
                    top_p=settings.eval_top_p, seed=settings.seed)  # fmt: skip
    with torch.no_grad():
        summary = evaluate_testbed(model, tokenizer, eval_ds, num_samples=settings.eval_samples, **sampling)
        modes = job_modes(job.name, settings)
        mode_records = evaluate_modes(model, tokenizer, check_ds, modes, **sampling) if modes else {}
    records = summary.pop("records")
    from .protocol import library_versions, sha256

    # not part of the key: the protocol judges runs, it does not change them (a file from before it has neither)
    return {"hash": job.hash, "key": job.key, "base_model_id": base_model_id(base_path),
            "protocol_sha256": sha256(), "versions": library_versions(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(), "recipe": job.name, "seed": job.seed,
            "num_generations": g,
            "train_seconds": seconds, "records": records, "modes": mode_records, "summary": summary,
            "log_history": info.get("log_history")}  # fmt: skip


def _worker_init() -> None:
    """Each worker: one torch thread (`runner.torch_threads` inside every job), no per-step progress bars (the
    parent's bar over jobs is the one to read), quiet libraries."""
    os.environ["TQDM_DISABLE"] = "1"
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch

    torch.set_num_threads(1)
    logging.basicConfig(level=logging.WARNING)
    for name in ("transformers", "trl", "datasets"):
        logging.getLogger(name).setLevel(logging.ERROR)


def run_jobs(jobs: list[Job], workers: int = 1, show_progress: bool = True, description: str = "testbed runs"
             ) -> dict[str, dict]:  # fmt: skip
    """Run the unfinished `jobs` (finished ones, same hash, are skipped) on `workers` spawned processes (1: in this
    process); returns `{job.path: outcome}` for the jobs run now (`run_job`'s dict). The bar counts every job,
    finished ones as already done, and its ETA is over the remaining ones."""
    from tqdm.auto import tqdm

    todo = [j for j in jobs if not j.finished()]
    groups: dict = {}  # jobs that train the same model run together (`run_group`): one training, their evaluations
    for job in sorted(todo, key=expected_cost, reverse=True):  # longest first (stable: ties keep the plan's order)
        groups.setdefault(training_identity(job) or job.path, []).append(job)
    outcomes: dict[str, dict] = {}
    bar = tqdm(total=len(jobs), initial=len(jobs) - len(todo), desc=description, unit="run",
               disable=not show_progress, dynamic_ncols=True)  # fmt: skip

    def done(outs: list[dict]) -> None:
        for out in outs:
            outcomes[out["path"]] = out
            bar.set_postfix_str(out["label"])
            bar.update(1)

    try:
        if workers <= 1 or len(groups) <= 1:
            for group in groups.values():
                bar.set_postfix_str(group[0].label)
                done(run_group(group))
        else:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor, as_completed

            # concurrent.futures, not multiprocessing.Pool: a worker that dies raises BrokenProcessPool here instead
            # of leaving the parent waiting forever
            context = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(min(workers, len(groups)), mp_context=context, initializer=_worker_init) as pool:
                for future in as_completed([pool.submit(run_group, group) for group in groups.values()]):
                    done(future.result())
    finally:
        bar.close()
    for out in outcomes.values():
        if out["error"]:
            logger.warning("testbed: %s failed: %s", out["label"], out["error"])
    return outcomes
