"""Cheap checks of the speed scripts in perf/ (the timings themselves are not tested)."""

import importlib.util
import json
import os
import sys

import pytest

from trl_efficient.recipes import RECIPES, get_recipe
from trl_efficient.trainer import EfficientGRPOConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load(script):
    spec = importlib.util.spec_from_file_location(script, os.path.join(ROOT, "perf", f"{script}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[script] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


overhead = _load("trainer_overhead")


class TestConfigKwargs:
    def test_precedence(self):
        # defaults < recipe overrides < fixed measurement settings, each key once
        kwargs, replaced = overhead.config_kwargs(
            {"beta": 0.04, "max_completion_length": 4000, "loss_type": "dapo"},
            {"max_completion_length": 64, "seed": 1},
            {"beta": 0.0, "temperature": 1.0},
        )
        assert kwargs == {"beta": 0.04, "temperature": 1.0, "max_completion_length": 64, "loss_type": "dapo", "seed": 1}
        assert replaced == ["max_completion_length"]  # the recipe's 4000 was replaced by the benchmark's 64

    def test_an_equal_value_is_not_reported_as_replaced(self):
        assert overhead.config_kwargs({"seed": 1}, {"seed": 1}, {})[1] == []

    def test_fixed_keys_are_checked(self):
        with pytest.raises(ValueError, match="BENCH_FIXED_KEYS"):
            overhead.config_kwargs({}, {"beta": 0.0})

    @pytest.mark.parametrize("name", list(RECIPES))
    def test_every_recipe_builds_a_config(self, name, tmp_path):
        # The old crash: EfficientGRPOConfig() got multiple values for keyword argument 'beta' (hbpo, drpo).
        recipe = get_recipe(name)
        fixed = {"output_dir": str(tmp_path), "max_steps": 3, "per_device_train_batch_size": 16,
                 "num_generations": 8, "max_completion_length": 64, "use_cpu": True, "report_to": "none"}  # fmt: skip
        overrides, scaled = overhead.scaled_overrides(name, 64, 3)
        kwargs, replaced = overhead.config_kwargs(overrides, fixed)
        args = EfficientGRPOConfig(**kwargs)  # the recipe's own validation passes at the benchmark's lengths
        for key, value in overrides.items():
            expected = fixed.get(key, value)
            assert kwargs[key] == expected
            assert (key in replaced) == (key in fixed and value != fixed[key])
        for key, value in overhead.BENCH_DEFAULTS.items():
            assert getattr(args, key) == recipe.config_overrides.get(key, value)
        assert args.max_completion_length == 64 and args.num_generations == 8


def test_scaled_overrides_fit_the_cap_and_keep_the_recipe_settings():
    # DA-DLER: truncate_to 2000 of max_completion_length 4000 is half: 32 of 64; the released +0.1 correct-sample
    # boost and the solve-rate threshold stay as the recipe has them (methods.md §4)
    overrides, names = overhead.scaled_overrides("da-dler", 64, 3)
    assert overrides["advantage_kwargs"] == {"solve_rate_threshold": 0.75, "truncate_to": 32, "correct_boost": 0.1}
    assert overrides["max_completion_length"] == 64 and "advantage_kwargs" in names
    assert get_recipe("da-dler").config_overrides["advantage_kwargs"]["truncate_to"] == 2000  # not mutated


def _row(**kw):
    counters = {"gen": 700.0, "prefill": 2900.0, "fwd_train": 4500.0, "fwd_nograd": 0.0, "fwd_ref": 0.0,
                "fwd_other": 0.0, "reward_ms": 1.25, "group_ms": 0.5}  # fmt: skip
    row = {"recipe": "kimi", "status": "ok", "error": "", "notes": "", "rounds": 3, "converged": True,
           "ratio": 1.01, "ratio_low": 0.99, "ratio_high": 1.03, "projected": 1.0, "plain_s_per_step": 0.25,
           "efficient_s_per_step": 0.2525, "efficient_counters": counters, "plain_counters": counters,
           "efficient_useful_groups": 2.0, "plain_useful_groups": 0.0, "own_ms": 5.5, "plain_own_ms": 4.25}  # fmt: skip
    return {**row, **kw}


def test_markdown_table_has_one_row_per_recipe_and_failures_inline():
    failed = {"recipe": "x", "status": "failed", "error": "ValueError: a | b", "notes": ""}
    lines = overhead.markdown_table([_row(), _row(recipe="dler", converged=False, rounds=8), failed]).splitlines()
    assert len(lines) == 5 and all(line.count("|") == lines[0].count("|") == 17 for line in lines)
    # 700 generated tokens / 2 useful groups = 350 per useful group; own code 5.5 - 4.25 = +1.25 ms per step
    assert lines[2] == (
        "| kimi | 1.01 [0.99, 1.03] | 3 | 1.00 | 700 | 2900 | 4500 | 0 | 0 | 0 | 1.2 | 0.5 | +1.2 | 350 "
        "| 0.250, 0.253 |  |"
    )
    assert "| 8 (limit) |" in lines[3]  # the round limit is said in the row
    assert lines[4].startswith("| x | failed |") and "ValueError: a / b" in lines[4]  # a "|" would split the cell
    assert "gen tok / useful group -" in overhead.baseline_line([_row()])  # no useful group: no division


def test_no_pass_recipes_are_checked_against_1_03_in_the_footer(capsys):
    options = {"model": "m", "batch": 8, "group": 8, "max_completion_length": 32, "steps": 5, "min_rounds": 2,
               "max_rounds": 2, "tolerance": 0.03}  # fmt: skip
    extra = {**_row()["efficient_counters"], "fwd_nograd": 4500.0}  # a signal pass: not a no-pass recipe
    rows = [_row(), _row(recipe="alp", ratio_high=1.05, own_ms=6.25), _row(recipe="pear", efficient_counters=extra)]
    overhead.print_report(rows, options, ["cmd"], "here", overhead.CostModel())
    out = capsys.readouterr().out
    # kimi (upper end 1.03) and alp (1.05) add no pass; alp's own code adds 6.25 - 4.25 = 2.0 ms of a 0.25 s step
    assert "add no generation and no forward pass (counters equal the baseline's): 2; upper end of the interval " \
           "<= 1.03x: 1 (above: alp). Their own code adds at most 2.0 ms per step" in out  # fmt: skip
    assert "0.8% of the baseline's median step (0.250 s)" in out


def test_own_seconds_counts_the_librarys_functions_only():
    import cProfile

    from work import StepTimer

    from trl_efficient.core.lengths import completion_text

    def outside():
        return sum(i * i for i in range(20000))

    profiler = cProfile.Profile()
    profiler.runcall(lambda: [completion_text([{"content": "x"}] * 50) for _ in range(2000)] and outside())
    own = overhead.own_seconds(profiler)
    assert own > 0
    timer = cProfile.Profile()
    timer.runcall(lambda: [StepTimer() for _ in range(2000)])  # trl_efficient.testing: the counters, not counted
    assert overhead.own_seconds(timer) == 0


class TestLockstep:
    """`LockstepPair.run`'s turn-taking, with two threads standing in for the worker processes (the same protocol
    over real pipes)."""

    @staticmethod
    def _side(conn, kind, steps, log):
        job = conn.recv()
        if job[0] != kind:  # the wrong side's job reached this worker: LockstepPair.run raises RuntimeError
            conn.send(("error", f"worker for {kind} got {job[0]}"))
            return
        for k in range(steps):
            conn.send(("ready", k))
            assert conn.recv() == "go"
            log.append((kind, k))
            conn.send(("done", k))
        conn.send(("result", {"step_seconds": [0.1] * steps}))

    def _run(self, plain_steps, efficient_steps, first, together=True, swap=False):
        import multiprocessing
        import threading

        pair = object.__new__(overhead.LockstepPair)  # no processes: the threads below answer on the pipes
        pair.conns, log, threads = {}, [], []
        # worker 0 expects the plain side's job, worker 1 the efficient side's (the other way round when swapped)
        for slot, (kind, steps) in enumerate(
            (("plain", plain_steps), ("efficient", efficient_steps))[:: -1 if swap else 1]
        ):
            parent, child = multiprocessing.Pipe()
            pair.conns[slot] = parent
            threads.append(threading.Thread(target=self._side, args=(child, kind, steps, log)))
        for t in threads:
            t.start()
        results = pair.run({"plain": ("plain",), "efficient": ("efficient",)}, first=first, together=together,
                           swap=swap)  # fmt: skip
        for t in threads:
            t.join()
        return results, log

    def test_steps_alternate_abba(self):
        results, log = self._run(4, 4, first="plain")
        assert [kind[0] for kind, _ in log] == list("peeppeep")  # one side at a time, the order flipping each step
        assert [k for _, k in log] == [0, 0, 1, 1, 2, 2, 3, 3]  # step k of both sides before step k + 1
        assert set(results) == {"plain", "efficient"}

    def test_one_after_the_other(self):
        _, log = self._run(3, 3, first="efficient", together=False)  # --no-lockstep: a model too large for two
        assert [kind[0] for kind, _ in log] == list("eeeppp")

    def test_swapped_workers_run_the_other_side(self):
        # worker 1 gets the plain job (a worker given the other side's job answers with an error)
        results, log = self._run(3, 3, first="plain", swap=True)
        assert [kind[0] for kind, _ in log] == list("peeppe") and set(results) == {"plain", "efficient"}

    def test_a_side_that_stops_early_lets_the_other_finish(self):
        results, log = self._run(4, 2, first="efficient")  # e.g. a stop rule ends the recipe's run
        assert [kind[0] for kind, _ in log] == list("eppepp")
        assert len(results["efficient"]["step_seconds"]) == 2


class TestInterval:
    def test_hand_computed(self):
        # logs 0, a, 2a (a = ln 1.1): mean a, sd a, half-width 4.303 * a / sqrt(3) = 0.2368
        est, low, high = overhead.ratio_interval([1.0, 1.1, 1.21])
        assert (est, low, high) == (
            pytest.approx(1.1),
            pytest.approx(0.8680, abs=1e-4),
            pytest.approx(1.3939, abs=1e-4),
        )

    def test_identical_rounds_have_a_zero_width_interval(self):
        assert overhead.ratio_interval([1.02] * 4) == (pytest.approx(1.02), pytest.approx(1.02), pytest.approx(1.02))

    def test_within_tolerance(self):
        assert overhead.interval_within(1.0, 0.975, 1.029, 0.03)
        assert not overhead.interval_within(1.0, 0.975, 1.031, 0.03)  # upper end 3.1% above

    def test_a_lasting_worker_effect_cancels_in_the_crossover_pairs(self):
        # a true ratio of 1.01 measured with worker 0 8% slower: odd rounds swap the workers
        rounds = [1.01 * (1.08 if r % 2 == 0 else 1 / 1.08) for r in range(8)]
        est, low, high = overhead.rounds_interval(rounds)
        assert (est, low, high) == (pytest.approx(1.01), pytest.approx(1.01), pytest.approx(1.01))
        _, low_rounds, high_rounds = overhead.ratio_interval(rounds)  # the same rounds taken one by one
        assert high_rounds - low_rounds > 0.1
        assert overhead.crossover_ratios([1.0, 1.0, 1.0]) == [1.0]  # an unpaired last round is left out

    def test_report_recomputes_the_interval_from_the_rounds(self, tmp_path, capsys):
        row = _row(ratio=1.0, ratio_low=0.5, ratio_high=1.5, converged=False,
                   round_ratios=[1.02 * 1.1, 1.02 / 1.1, 1.02 * 1.1, 1.02 / 1.1])  # fmt: skip
        options = {"model": "m", "batch": 8, "group": 8, "max_completion_length": 32, "steps": 5, "min_rounds": 4,
                   "max_rounds": 4, "tolerance": 0.03}  # fmt: skip
        run = {"command": "cmd", "options": options, "machine": "here", "cost_model": {}, "rows": [row]}
        path = tmp_path / "run.json"
        path.write_text(json.dumps(run))
        overhead.report([str(path)])
        assert "| 1.02 [1.02, 1.02] |" in capsys.readouterr().out


class TestCostModel:
    def test_units_hand_computed(self):
        # 4.0 * 100 + 1.0 * 50 + 3.9 * 150 (loss) + 1.3 * (150 policy no-grad + 20 ref) + 0.104 * 10 (scorer) = 1257.04
        work = {"generated": {"policy (trl.x)": 60, "Qwen2ForCausalLM (bingo.y)": 40}, "prefilled": {"policy (x)": 50},
                "forward": {"policy train": 150, "policy no-grad": 150, "ref no-grad": 20,
                            "BertForTokenClassification no-grad": 10}}  # fmt: skip
        assert overhead.CostModel().units(work) == pytest.approx(1257.04)

    def test_equal_work_projects_one_and_an_extra_pass_costs_its_tokens(self):
        plain = {"generated": {"policy (x)": 100}, "forward": {"policy train": 200}}  # 400 + 780 = 1180
        model = overhead.CostModel()
        assert model.ratio(plain, plain) == 1.0
        extra = {**plain, "forward": {"policy train": 200, "policy no-grad": 200}}  # + 1.3 * 200 = 260
        assert model.ratio(plain, extra) == pytest.approx(1440 / 1180)


def test_counter_columns_split_roles():
    forward = {"policy train": 30, "policy no-grad": 20, "ref no-grad": 30, "BertForTokenClassification no-grad": 4}
    work = {"generated": {"policy (a)": 10, "policy (b)": 5}, "prefilled": {"policy (a)": 7}, "forward": forward,
            "seconds": {"reward:correctness_reward": 0.002, "reward:kimi": 0.001, "group_stage": 0.0005}}  # fmt: skip
    assert overhead.counter_columns(work) == {"gen": 15, "prefill": 7, "fwd_train": 30, "fwd_nograd": 20,
                                              "fwd_ref": 30, "fwd_other": 4, "reward_ms": pytest.approx(3.0),
                                              "group_ms": pytest.approx(0.5)}  # fmt: skip


def test_useful_groups():
    # plain: half of 2 groups, then both -> 1.5; dynamic sampling: need 2, shortfall 1 -> 1 (TRL's value ignored)
    assert overhead.useful_groups([{"frac_reward_zero_std": 0.5}, {"frac_reward_zero_std": 0.0}], 2) == 1.5
    ds = {"trl_efficient/dynamic_sampling/shortfall_groups": 1.0, "frac_reward_zero_std": 1.0}
    assert overhead.useful_groups([ds], 2) == 1.0
    assert overhead.useful_groups([{"loss": 0.0}], 2) is None


def test_baseline_is_the_recipes_correctness_reward():
    assert overhead.baseline_correctness_kwargs(get_recipe("hbpo")) == {"require_think_close": True}
    assert overhead.baseline_correctness_kwargs(get_recipe("cosine")) == {}  # checks answers itself: the default one
    assert overhead.baseline_correctness_kwargs(get_recipe("kimi")) == {}


def test_report_merges_runs_and_refuses_different_settings(tmp_path, capsys):
    options = {"model": "tiny:qwen2-16", "batch": 8, "group": 8, "max_completion_length": 32, "steps": 5,
               "min_rounds": 2, "max_rounds": 2, "tolerance": 0.03, "threads": 1, "device": "cpu"}  # fmt: skip
    cost = {k: v for k, v in vars(overhead.CostModel()).items()}
    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    a.write_text(json.dumps({"command": "run a", "options": options, "cost_model": cost, "rows": [_row()]}))
    grpo = _row(recipe="grpo", ratio=1.01, ratio_low=0.97, ratio_high=1.05, converged=False)
    b.write_text(json.dumps({"command": "run b", "options": options, "cost_model": cost, "rows": [grpo]}))
    assert overhead.main(["--report", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "`run a`\n`run b`" in out and "| kimi |" in out and "| grpo |" in out
    assert "grpo reads 1.010 [0.970, 1.050]: 1.00 is inside its interval" in out
    assert "2 of 2 recipes have a row." in out and "round limit reached) for 1 recipe(s): grpo." in out
    # half-widths: kimi (1.03 - 0.99) / 2 / 1.01 = 1.98%, grpo (1.05 - 0.97) / 2 / 1.01 = 3.96%; median 2.97%
    assert "Interval half-widths: median 3.0% (2.0-4.0%); 1 of 2 within +-3%." in out
    c.write_text(json.dumps({"command": "run c", "options": {**options, "batch": 16}, "cost_model": cost, "rows": []}))
    with pytest.raises(SystemExit, match="differs .* in \\['batch'\\]"):
        overhead.main(["--report", str(a), str(c)])


def test_scripts_resolve_tiny_and_testbed_names_in_a_fresh_interpreter():
    """The package root registers no model scheme (explicit registration), so the scripts resolve model names through
    `trl_efficient.api.resolve_model`: in a fresh interpreter (no conftest), `tiny:` resolves to a built directory."""
    import subprocess

    code = ("from trl_efficient.api import resolve_model; import os; p = resolve_model('tiny:qwen2-16'); "
            "assert os.path.isfile(os.path.join(p, 'config.json')), p; print('ok')")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]
    for script in ("perf/trainer_overhead.py", "perf/entropy_overhead.py", "perf/bingo_scorer_throughput.py",
                   "scripts/gpu_check.py"):  # fmt: skip
        source = open(os.path.join(ROOT, script)).read()
        assert "resolve_model_name" not in source and "resolve_model" in source, script


class TestGroupSignal:
    """perf/testbed/group_signal.py: the length gap of a group, GRPO's and GFPO's (the sampling itself is not run)."""

    gs = staticmethod(lambda: _load("testbed/group_signal"))

    def test_gap_hand_computed(self):
        gs = self.gs()
        # advantages +-1: reinforced 10 and 30 (mean 20), penalised 20 and 40 (mean 30)
        assert gs.length_gap([1, 0, 1, 0], [10, 20, 30, 40]) == pytest.approx(-10.0)
        # rewards 1, 1, 1, 0 (mean 0.75, std 0.433): A = +0.577 x3, -1.732; reinforced mean (10 + 20 + 30) / 3 = 20
        assert gs.length_gap([1, 1, 1, 0], [10, 20, 30, 40]) == pytest.approx(20.0 - 40.0)
        assert gs.length_gap([1, 1, 1, 1], [10, 20, 30, 40]) is None  # no signal

    def test_gfpo_keeps_the_shortest_and_can_lose_the_signal(self):
        gs = self.gs()
        # the two shortest (5: wrong, 10: right) carry the signal; the long right answers get no advantage
        assert gs.length_gap([1, 1, 0, 1], [10, 50, 5, 60], keep=2) == pytest.approx(10.0 - 5.0)
        assert gs.length_gap([1, 1, 0, 0], [10, 20, 30, 40], keep=2) is None  # both kept are right

    def test_summary_counts_groups_without_signal_as_zero_pressure(self):
        gs = self.gs()
        groups = [{"ops": 1, "rewards": [1, 1, 1, 1], "lengths": [10, 20, 30, 40]},
                  {"ops": 1, "rewards": [1, 0, 1, 0], "lengths": [10, 20, 30, 40]}]  # fmt: skip
        easy = gs.summarise(groups, group=4, keep=4)["easy (1-2 ops)"]
        assert easy["grpo"]["signal"][0] == 0.5 and easy["grpo"]["gap"][0] == pytest.approx(-10.0)
        assert easy["grpo"]["pressure"][0] == pytest.approx(-5.0)  # (0 + -10) / 2
        text = gs.markdown({"summary": gs.summarise(groups, 4, 2), "model": "m", "num_tasks": 2, "group": 4, "keep": 2,
                            "max_new_tokens": 8, "seed": 0, "command": "c", "seconds": 1.0})  # fmt: skip
        assert "| easy (1-2 ops) | 2 | 0.750 [" in text  # accuracies 1.0 and 0.5


def test_docs_speed_table_is_the_rendering_of_the_committed_runs(tmp_path, capsys):
    # docs/speed.md's table (the README's until issue 46) comes from the three committed --json files (its text names
    # the command; the third measured four recipes again over more rounds, and its rows replace theirs)
    readme = tmp_path / "speed.md"
    with open(os.path.join(ROOT, "docs", "speed.md"), encoding="utf-8") as f:
        committed = f.read()
    readme.write_text(committed, encoding="utf-8")
    kinds = ("no_pass", "pass", "no_pass_more_rounds")
    runs = [os.path.join(ROOT, "perf", "results", f"trainer_overhead_{kind}.json") for kind in kinds]
    assert overhead.report(runs, str(readme)) == 0
    assert readme.read_text(encoding="utf-8") == committed, (
        "docs/speed.md's table differs from the committed runs: python perf/trainer_overhead.py --report "
        + " ".join(f"perf/results/trainer_overhead_{kind}.json" for kind in kinds)
        + " --update-readme docs/speed.md"
    )
