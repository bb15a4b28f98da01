"""The one home of paper citations: arXiv id -> title and authors, and the BibTeX entry a model card prints.

Titles and authors come from the arXiv listings named in `methods.md` (each method's section gives the arXiv id and,
where it differs from the method's name, the paper's title). Where the full author list was not checked, the entry
names the first author and "others" (BibTeX's `and others`), or no author at all when even that was not checked:
a shorter entry, never an invented one. Every entry carries `eprint`/`archivePrefix` and the paper's arXiv page,
so a reader can always reach the paper.

>>> print(bibtex("2503.04697").splitlines()[0])
@misc{arxiv2503_04697,
>>> "https://arxiv.org/abs/2503.04697" in bibtex("2503.04697")
True
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["PAPERS", "Paper", "arxiv_url", "bibtex", "trl_bibtex"]

_ARXIV_ID = re.compile(r"^\d{4}\.\d{4,5}$")


@dataclass(frozen=True)
class Paper:
    """A cited paper: `title`, `authors` (BibTeX `author` value; `""` when unchecked) and `arxiv_id`."""

    arxiv_id: str
    title: str
    authors: str = ""

    @property
    def year(self) -> int:
        """The year of the first arXiv version: the id's `YYMM` prefix (2503.04697 -> 2025)."""
        return 2000 + int(self.arxiv_id[:2])


def _p(arxiv_id: str, title: str, authors: str = "") -> tuple[str, Paper]:
    return arxiv_id, Paper(arxiv_id, title, authors)


PAPERS: dict[str, Paper] = dict(
    [
        _p(
            "2402.03300",
            "DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language Models",
            "Shao, Zhihong and Wang, Peiyi and Zhu, Qihao and Xu, Runxin and Song, Junxiao and Bi, Xiao and Zhang, "
            "Haowei and Zhang, Mingchuan and Li, Y. K. and Wu, Y. and Guo, Daya",
        ),
        _p("2501.12599", "Kimi k1.5: Scaling Reinforcement Learning with LLMs", "{Kimi Team}"),
        _p(
            "2502.03373",
            "Demystifying Long Chain-of-Thought Reasoning in LLMs",
            "Yeo, Edward and Tong, Yuxuan and Niu, Morry and Neubig, Graham and Yue, Xiang",
        ),
        _p(
            "2503.04697",
            "L1: Controlling How Long A Reasoning Model Thinks With Reinforcement Learning",
            "Aggarwal, Pranjal and Welleck, Sean",
        ),
        _p("2503.14476", "DAPO: An Open-Source LLM Reinforcement Learning System at Scale", "Yu, Qiying and others"),
        _p(
            "2503.20783",
            "Understanding R1-Zero-Like Training: A Critical Perspective",
            "Liu, Zichen and Chen, Changyu and Li, Wenjun and Qi, Penghui and Pang, Tianyu and Du, Chao and Lee, "
            "Wee Sun and Lin, Min",
        ),
        _p(
            "2504.09696",
            "GRPO-LEAD: A Difficulty-Aware Reinforcement Learning Approach for Concise Mathematical Reasoning in "
            "Language Models",
        ),
        _p(
            "2504.21370",
            "ShorterBetter: Guiding Reasoning Models to Find Optimal Inference Length for Efficient Reasoning",
            "Yi, Jingyang and Wang, Jiazheng and Li, Sida",
        ),
        _p(
            "2505.11225",
            "HAPO: Training Language Models to Reason Concisely via History-Aware Policy Optimization",
            "Huang, Chengyu and Zhang, Zhengxin and Cardie, Claire",
        ),
        _p("2505.15400", "When to Continue Thinking: Adaptive Thinking Mode Switching for Efficient Reasoning"),
        _p(
            "2505.15612",
            "Learn to Reason Efficiently with Adaptive Length-based Reward Shaping",
            "Liu, Wei and others",
        ),
        _p("2505.18086", "Stable Reinforcement Learning for Efficient Reasoning"),
        _p("2505.18298", "Thinking Fast and Right: Balancing Accuracy and Reasoning Length with Adaptive Rewards"),
        _p(
            "2506.05256",
            "Just Enough Thinking: Efficient Reasoning with Adaptive Length Penalties Reinforcement Learning",
        ),
        _p(
            "2506.08125",
            "Not All Tokens Matter: Towards Efficient LLM Reasoning via Token Significance in RL",
            "Liu, Hanbing and others",
        ),
        _p("2507.15758", "LAPO: Internalizing Reasoning Efficiency via Length-Adaptive Policy Optimization"),
        _p("2507.15844", "Hierarchical Budget Policy Optimization for Adaptive Reasoning", "Lyu, Shangke and others"),
        _p("2508.08940", "Train Long, Think Short: Curriculum Learning for Efficient Reasoning"),
        _p("2508.09726", "Sample More to Think Less: Group Filtered Policy Optimization for Concise Reasoning"),
        _p("2508.10026", "SABER: Switchable and Balanced Training for Efficient LLM Reasoning", "Zhao, Kai and others"),
        _p("2508.17196", "BudgetThinker: Empowering Budget-aware LLM Reasoning with Control Tokens"),
        _p(
            "2509.23962", "CANON: Conditional Advantage Estimation for Reinforcement Learning in Large Reasoning Models"
        ),
        _p("2510.01459", "LSPO: Length-aware Dynamic Sampling for Policy Optimization in LLM Reasoning"),
        _p(
            "2510.03805",
            "Beyond Token Length: Step Pruner for Efficient and Accurate Reasoning in Large Language Models",
        ),
        _p("2510.04474", "DRPO: Efficient Reasoning via Decoupled Reward Policy Optimization"),
        _p("2510.08026", "PEAR: Phase Entropy Aware Reward for Efficient Reasoning"),
        _p("2510.09535", "Mitigating Overthinking through Reasoning Shaping"),
        _p(
            "2510.15110",
            "DLER: Doing Length pEnalty Right - Incentivizing More Intelligence per Token via Reinforcement Learning",
            "Liu, Shih-Yang and others",
        ),
        _p(
            "2511.01937",
            "Shorter but not Worse: Frugal Reasoning via Easy Samples as Length Regularizers in Math RLVR",
        ),
        _p("2601.03969", "Anti-Length Shift: Dynamic Outlier Truncation for Training Efficient Reasoning Models"),
        _p(
            "2601.05242",
            "GDPO: Group reward-Decoupled Normalization Policy Optimization for Multi-reward RL Optimization",
            "Liu, Shih-Yang and others",
        ),
    ]
)


def trl_bibtex() -> str | None:
    """TRL's own citation, read from TRL's model-card template (`trl/templates/lm_model_card.md`, the `{% raw %}`
    block) so it is never retyped here; `None` if that template is not found."""
    from importlib import resources

    try:
        text = resources.files("trl").joinpath("templates", "lm_model_card.md").read_text(encoding="utf-8")
    except (FileNotFoundError, ModuleNotFoundError, OSError):
        return None
    found = re.search(r"\{% raw %\}(.*?vonwerra2020trl.*?)\{% endraw %\}", text, flags=re.DOTALL)
    return found.group(1).strip() if found else None


def arxiv_url(arxiv_id: str) -> str:
    """The paper's arXiv abstract page; a malformed id is a `ValueError` (a card never links a made-up page)."""
    if not _ARXIV_ID.match(str(arxiv_id)):
        raise ValueError(f"not an arXiv id (YYMM.NNNNN): {arxiv_id!r}")
    return f"https://arxiv.org/abs/{arxiv_id}"


def bibtex(arxiv_id: str) -> str:
    """The BibTeX entry of `arxiv_id`; an id missing from `PAPERS` is a `KeyError` naming this table."""
    if arxiv_id not in PAPERS:
        raise KeyError(f"arXiv {arxiv_id} has no entry in trl_efficient.hub.papers.PAPERS; add its title and authors.")
    paper = PAPERS[arxiv_id]
    fields = [("title", "{" + paper.title + "}")]
    if paper.authors:
        fields.append(("author", paper.authors))
    fields += [
        ("year", str(paper.year)),
        ("eprint", paper.arxiv_id),
        ("archivePrefix", "arXiv"),
        ("url", arxiv_url(paper.arxiv_id)),
    ]
    body = ",\n".join(f"  {k:<13} = {{{v}}}" for k, v in fields)
    return f"@misc{{arxiv{arxiv_id.replace('.', '_')},\n{body}\n}}"
