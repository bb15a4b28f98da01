"""DOT (methods.md §21) under a scripted policy whose lengths are set token by token, so cuts are computed by hand.

Used in-process by tests/methods/test_dot.py and launched by tests/multiprocess/test_multiprocess_dot.py with
`torchrun --nproc_per_node {1,2}`: 16 global rows = 4 groups of G=4; with 2 processes each rank holds 8 rows. Refill
passes hold 1 or 2 prompts (4 or 8 rows), so with 2 processes a refilled group straddles the ranks.

Script, by generation pass of a step (`DOTScriptMixin`) and group `g` (global row // 4), rows 0-2 / row 3:
- first pass, g % 3 == 0: 10-token answers, one 100-token answer (all end in \\boxed{7}): all correct, lengths
  [10, 10, 10, 100]: mean 32.5, sample std 45; with alpha 1, T = floor(77.5) = 77, 100 - 77 = 23 >= m = 16: cut;
- first pass, g % 3 == 1: the same, but the long row has no \\boxed{}: success 3/4 < 1, untouched (informative);
- first pass, g % 3 == 2: four 10-token correct answers: signal-free (std 0, nothing to cut);
- refill passes: every group as g % 3 == 1 (informative).
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from helpers import make_dataset, tiny_config  # noqa: E402
from trl import GRPOTrainer  # noqa: E402

from trl_efficient.methods.dot import DOTTrainer  # noqa: E402
from trl_efficient.trainer import EfficientGRPOTrainer  # noqa: E402

SHORT, LONG, G = 10, 100, 4


def boxed_reward(completions, **kwargs):
    """Correct iff the text holds the answer `\\boxed{7}` (it sits at the very end of every scripted answer)."""
    return [1.0 if "\\boxed{7}" in c[0]["content"] else 0.0 for c in completions]


class DOTScriptMixin(GRPOTrainer):
    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        step = self.state.global_step
        self._pass = self._pass + 1 if getattr(self, "_pass_step", None) == step else 0
        self._pass_step = step
        tok = self.processing_class
        eos = tok.eos_token_id
        filler = tok(" a", add_special_tokens=False)["input_ids"]
        boxed = tok(" \\boxed{7}", add_special_tokens=False)["input_ids"]
        assert len(filler) == 1
        start = self.accelerator.process_index * len(prompt_ids)
        out = []
        for i in range(len(prompt_ids)):
            g, j = divmod(start + i, G)
            kind = g % 3 if self._pass == 0 else 1
            if j < 3 or kind == 2:
                out.append(filler * (SHORT - len(boxed) - 1) + boxed + [eos])
            elif kind == 0:
                out.append(filler * (LONG - len(boxed) - 1) + boxed + [eos])
            else:
                out.append(filler * (LONG - 1) + [eos])
        return out, None


class ScoringPassMixin(EfficientGRPOTrainer):
    """Below `DOTTrainer` in the MRO: counts every scoring pass (first scoring and re-scoring) and its rows."""

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        self.scoring_passes.append([len(ids) for ids in completion_ids_list])
        return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)


class DOTScriptTrainer(DOTTrainer, ScoringPassMixin, DOTScriptMixin):
    """Records per training batch the gathered batch the group stage saw and this process's output."""

    def __init__(self, *args, **kwargs):
        self.records, self.scoring_passes = [], []
        super().__init__(*args, group_stages=[self._record], **kwargs)

    def _record(self, batch, trainer):
        self.records.append(
            {
                "rewards": [r[0] for r in batch.rewards.tolist()],
                "lengths": batch.lengths.tolist(),
                "truncated": batch.truncated.tolist(),
                "idx": batch.metadata.get("idx"),
            }
        )

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        if self.model.training:
            self.records[-1]["advantages"] = out["advantages"].tolist()
            self.records[-1]["completion_mask_sums"] = out["completion_mask"].sum(1).tolist()
            self.records[-1]["num_items_in_batch"] = float(out["num_items_in_batch"])
        return out


def make_trainer(model_dir, out_dir, world=1, filter_kwargs=None, **overrides):
    kwargs = dict(
        per_device_train_batch_size=16 // world,
        num_generations=G,
        max_completion_length=128,
        max_steps=2,
        completion_filter="dot",
        filter_kwargs={"alpha": 1.0, "margin": 16, **(filter_kwargs or {})},
        correctness_reward="boxed_reward",
        loss_type="dapo",
        epsilon_high=0.28,
        ddp_find_unused_parameters=False,
    )
    kwargs.update(overrides)
    return DOTScriptTrainer(
        model=model_dir,
        reward_funcs=[boxed_reward],
        args=tiny_config(out_dir, **kwargs),
        train_dataset=make_dataset(32),
    )


def main(model_dir: str, out_dir: str) -> None:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    trainer = make_trainer(model_dir, out_dir, world)
    trainer.train()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(
            {
                "world": world,
                "records": trainer.records,
                "scoring_passes": trainer.scoring_passes,
                "window": trainer.dot.state_dict(),
                "refill": trainer.refill_sampler.state_dict(),
            },
            f,
        )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    from helpers import finish_distributed  # noqa: E402

    finish_distributed()
