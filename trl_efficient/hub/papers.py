"""The one home of paper citations: arXiv id -> title and authors, and the BibTeX entry a model card prints.

Titles and authors were checked, entry by entry, against the authors' own BibTeX in the method's repository (the
"Source repositories" of `methods.md`) or the paper's arXiv listing; the comment above each entry names which. Titles
are the arXiv titles (not the method's short name, e.g. 2509.23962 has no "CANON:" prefix). Where only part of the
author list could be checked, the entry ends in BibTeX's `and others`, or has no author at all: a shorter entry,
never an invented one. Every entry carries `eprint`/`archivePrefix` and the paper's arXiv page, so a reader can
always reach the paper.

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
        # Each entry names where its title and authors were checked: "README" is the BibTeX in the method's own
        # repository (the commit listed under "Source repositories" in methods.md, or newer), "arXiv" the paper's arXiv
        # listing. Titles are arXiv's, never the method's short name; author lists are the arXiv order, in full
        # unless the authors' own BibTeX ends in "others".
        #
        # arXiv listing (11 authors). deepseek-ai/DeepSeek-Math's README BibTeX omits Xiao Bi and Haowei Zhang.
        _p(
            "2402.03300",
            "DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language Models",
            "Shao, Zhihong and Wang, Peiyi and Zhu, Qihao and Xu, Runxin and Song, Junxiao and Bi, Xiao and Zhang, "
            "Haowei and Zhang, Mingchuan and Li, Y. K. and Wu, Y. and Guo, Daya",
        ),
        # README: the BibTeX of OptimalScale/LMFlow's README (LISA's released code), 7 authors as on arXiv.
        _p(
            "2403.17919",
            "LISA: Layerwise Importance Sampling for Memory-Efficient Large Language Model Fine-Tuning",
            "Pan, Rui and Liu, Xiang and Diao, Shizhe and Pi, Renjie and Zhang, Jipeng and Han, Chi and Zhang, Tong",
        ),
        # arXiv listing; the README of O1-Pruner's released code names the title and links the paper, no BibTeX.
        _p(
            "2501.12570",
            "O1-Pruner: Length-Harmonizing Fine-Tuning for O1-Like Reasoning Pruning",
            "Luo, Haotian and Shen, Li and He, Haiying and Wang, Yibo and Liu, Shiwei and Li, Wei and Tan, Naiqiang "
            "and Cao, Xiaochun and Tao, Dacheng",
        ),
        # README of MoonshotAI/Kimi-k1.5 (its BibTeX lists the team, the first ten authors, then "others").
        _p(
            "2501.12599",
            "Kimi k1.5: Scaling Reinforcement Learning with LLMs",
            "{Kimi Team} and Du, Angang and Gao, Bofei and Xing, Bowei and Jiang, Changjiu and Chen, Cheng and Li, "
            "Cheng and Xiao, Chenjun and Du, Chenzhuang and Liao, Chonghua and others",
        ),
        # README of eddycmu/demystify-long-cot.
        _p(
            "2502.03373",
            "Demystifying Long Chain-of-Thought Reasoning in LLMs",
            "Yeo, Edward and Tong, Yuxuan and Niu, Morry and Neubig, Graham and Yue, Xiang",
        ),
        # README of cmu-l3/l1.
        _p(
            "2503.04697",
            "L1: Controlling How Long A Reasoning Model Thinks With Reinforcement Learning",
            "Aggarwal, Pranjal and Welleck, Sean",
        ),
        # arXiv listing (BytedTsinghua-SIA/DAPO's README has no BibTeX).
        _p(
            "2503.14476",
            "DAPO: An Open-Source LLM Reinforcement Learning System at Scale",
            "Yu, Qiying and Zhang, Zheng and Zhu, Ruofei and Yuan, Yufeng and Zuo, Xiaochen and Yue, Yu and Fan, "
            "Tiantian and Liu, Gaohong and Liu, Lingjun and Liu, Xin and Lin, Haibin and Lin, Zhiqi and Ma, Bole and "
            "Sheng, Guangming and Tong, Yuxuan and Zhang, Chi and Zhang, Mofan and Zhang, Wang and Zhu, Hang and Zhu, "
            "Jinhua and Chen, Jiaze and Chen, Jiangjie and Wang, Chengyi and Yu, Hongli and Dai, Weinan and Song, "
            "Yuxuan and Wei, Xiangpeng and Zhou, Hao and Liu, Jingjing and Ma, Wei-Ying and Zhang, Ya-Qin and Yan, Lin "
            "and Qiao, Mu and Wu, Yonghui and Wang, Mingxuan",
        ),
        # arXiv listing; same authors in the README of sail-sg/understand-r1-zero.
        _p(
            "2503.20783",
            "Understanding R1-Zero-Like Training: A Critical Perspective",
            "Liu, Zichen and Chen, Changyu and Li, Wenjun and Qi, Penghui and Pang, Tianyu and Du, Chao and Lee, "
            "Wee Sun and Lin, Min",
        ),
        # README of aeroplanepaper/GRPO-LEAD.
        _p(
            "2504.09696",
            "GRPO-LEAD: A Difficulty-Aware Reinforcement Learning Approach for Concise Mathematical Reasoning in "
            "Language Models",
            "Zhang, Jixiao and Zuo, Chunsheng",
        ),
        # arXiv listing; the README of JingyangYi/ShorterBetter names the title and links the paper, no BibTeX.
        _p(
            "2504.21370",
            "ShorterBetter: Guiding Reasoning Models to Find Optimal Inference Length for Efficient Reasoning",
            "Yi, Jingyang and Wang, Jiazheng and Li, Sida",
        ),
        # arXiv listing; the README of HCY123902/HAPO names the title, no BibTeX.
        _p(
            "2505.11225",
            "HAPO: Training Language Models to Reason Concisely via History-Aware Policy Optimization",
            "Huang, Chengyu and Zhang, Zhengxin and Cardie, Claire",
        ),
        # arXiv listing; same authors in the ACL Anthology entry (Findings of EMNLP 2025).
        _p(
            "2505.15400",
            "When to Continue Thinking: Adaptive Thinking Mode Switching for Efficient Reasoning",
            "Zhang, Xiaoyun and Ruan, Jingqing and Ma, Xing and Zhu, Yawen and Zhao, Haodong and Li, Hao and Chen, "
            "Jiansong and Zeng, Ke and Cai, Xunliang",
        ),
        # README of hkust-nlp/Laser.
        _p(
            "2505.15612",
            "Learn to Reason Efficiently with Adaptive Length-based Reward Shaping",
            "Liu, Wei and Zhou, Ruochen and Deng, Yiyun and Huang, Yuzhen and Liu, Junteng and Deng, Yuntian and "
            "Zhang, Yizhe and He, Junxian",
        ),
        # arXiv listing ("GRPO-λ" is the method's name, not part of the title).
        _p(
            "2505.18086",
            "Stable Reinforcement Learning for Efficient Reasoning",
            "Dai, Muzhi and Liu, Shixuan and Si, Qingyi",
        ),
        # arXiv listing (JinyanSu1/A-DLP's README has no BibTeX).
        _p(
            "2505.18298",
            "Thinking Fast and Right: Balancing Accuracy and Reasoning Length with Adaptive Rewards",
            "Su, Jinyan and Cardie, Claire",
        ),
        # arXiv listing (8 authors); the title as listed there.
        _p(
            "2505.24864",
            "ProRL: Prolonged Reinforcement Learning Expands Reasoning Boundaries in Large Language Models",
            "Liu, Mingjie and Diao, Shizhe and Lu, Ximing and Hu, Jian and Dong, Xin and Choi, Yejin and Kautz, Jan "
            "and Dong, Yi",
        ),
        # arXiv listing.
        _p(
            "2506.05256",
            "Just Enough Thinking: Efficient Reasoning with Adaptive Length Penalties Reinforcement Learning",
            "Xiang, Violet and Blagden, Chase and Rafailov, Rafael and Lile, Nathan and Truong, Sang and Finn, "
            "Chelsea and Haber, Nick",
        ),
        # README of microsoft/Bingo; the arXiv title (v2 to v4) is the same, "... in Reinforcement Learning".
        _p(
            "2506.08125",
            "Not All Tokens Matter: Towards Efficient LLM Reasoning via Token Significance in Reinforcement Learning",
            "Liu, Hanbing and Cao, Lang and Ren, Yuanyi and Zhou, Mengyu and Dong, Haoyu and Ma, Xiaojun and Han, "
            "Shi and Zhang, Dongmei",
        ),
        # README of ZJU-REAL/LAPO.
        _p(
            "2507.15758",
            "LAPO: Internalizing Reasoning Efficiency via Length-Adaptive Policy Optimization",
            "Wu, Xingyu and Yan, Yuchen and Lyu, Shangke and Wu, Linjuan and Qiu, Yiwen and Shen, Yongliang and Lu, "
            "Weiming and Shao, Jian and Xiao, Jun and Zhuang, Yueting",
        ),
        # README of ZJU-REAL/HBPO.
        _p(
            "2507.15844",
            "Hierarchical Budget Policy Optimization for Adaptive Reasoning",
            "Lyu, Shangke and Wu, Linjuan and Yan, Yuchen and Wu, Xingyu and Li, Hao and Shen, Yongliang and Jiang, "
            "Peisheng and Lu, Weiming and Xiao, Jun and Zhuang, Yueting",
        ),
        # arXiv listing.
        _p(
            "2508.08940",
            "Train Long, Think Short: Curriculum Learning for Efficient Reasoning",
            "Hammoud, Hasan Abed Al Kader and Alhamoud, Kumail and Hammoud, Abed and Bou-Zeid, Elie and Ghassemi, "
            "Marzyeh and Ghanem, Bernard",
        ),
        # arXiv listing (the paper's first page).
        _p(
            "2508.09726",
            "Sample More to Think Less: Group Filtered Policy Optimization for Concise Reasoning",
            "Shrivastava, Vaishnavi and Awadallah, Ahmed and Balachandran, Vidhisha and Garg, Shivam and Behl, "
            "Harkirat and Papailiopoulos, Dimitris",
        ),
        # README of bilibili/saber_rl (authors); its BibTeX lower-cases the title, the README heading and arXiv don't.
        _p(
            "2508.10026",
            "SABER: Switchable and Balanced Training for Efficient LLM Reasoning",
            "Zhao, Kai and Zhao, Yanjun and Song, Jiaming and He, Shien and Zhang, Lusheng and Zhang, Qiang and Li, "
            "Tianjiao",
        ),
        # Title: README of MobileLLM/BudgetThinker and arXiv. Authors: arXiv listing as mirrored by paper indexes.
        _p(
            "2508.17196",
            "BudgetThinker: Empowering Budget-aware LLM Reasoning with Control Tokens",
            "Wen, Hao and Wu, Xinrui and Sun, Yi and Zhang, Feifei and Chen, Liye and Wang, Jie and Liu, Yunxin and "
            "Liu, Yunhao and Zhang, Ya-Qin and Li, Yuanchun",
        ),
        # README of amazon-science/Self-Aligned-Reward-Towards_Effective_and_Efficient_Reasoners.
        _p(
            "2509.05489",
            "Self-Aligned Reward: Towards Effective and Efficient Reasoners",
            "Han, Peixuan and Krishnan, Adit and Friedland, Gerald and You, Jiaxuan and Kong, Chris",
        ),
        # README of biuboomc/CANON and arXiv: the title has no "CANON:" prefix.
        _p(
            "2509.23962",
            "Conditional Advantage Estimation for Reinforcement Learning in Large Reasoning Models",
            "Chen, Guanxu and Li, Yafu and Jiang, Yuxian and Qian, Chen and Ren, Qihan and Yang, Jingyi and Cheng, Yu "
            "and Liu, Dongrui and Shao, Jing",
        ),
        # arXiv listing (11 authors); the title as listed there.
        _p(
            "2510.01180",
            "BroRL: Scaling Reinforcement Learning via Broadened Exploration",
            "Hu, Jian and Liu, Mingjie and Lu, Ximing and Wu, Fang and Harchaoui, Zaid and Diao, Shizhe and Choi, "
            "Yejin and Molchanov, Pavlo and Yang, Jun and Kautz, Jan and Dong, Yi",
        ),
        # arXiv listing.
        _p(
            "2510.01459",
            "LSPO: Length-aware Dynamic Sampling for Policy Optimization in LLM Reasoning",
            "Chen, Weizhe and Koenig, Sven and Dilkina, Bistra",
        ),
        # arXiv listing (v3).
        _p(
            "2510.03805",
            "Beyond Token Length: Step Pruner for Efficient and Accurate Reasoning in Large Language Models",
            "Wu, Canhui and Cao, Qiong and Li, Chang and Wang, Zhenfang and Xue, Chao and Fan, Yuwei and Xi, Wei and "
            "He, Xiaodong",
        ),
        # README of Optimization-AI/DRPO.
        _p(
            "2510.04474",
            "DRPO: Efficient Reasoning via Decoupled Reward Policy Optimization",
            "Li, Gang and Chen, Yan and Lin, Ming and Yang, Tianbao",
        ),
        # arXiv listing.
        _p(
            "2510.08026",
            "PEAR: Phase Entropy Aware Reward for Efficient Reasoning",
            "Huang, Chen and Lu, Wei and Zhang, Wenxuan",
        ),
        # arXiv listing ("GRSP" is the method's name, not part of the title).
        _p(
            "2510.09535",
            "Mitigating Overthinking through Reasoning Shaping",
            "Song, Feifan and Wei, Shaohang and Gao, Bofei and Wang, Yejie and Luo, Wen and Li, Wei and Yao, Linli "
            "and Xiong, Weimin and Chen, Liang and Liu, Tianyu and Wang, Houfeng",
        ),
        # Title: arXiv listing (NVlabs/DLER's README BibTeX drops the spaces around the dash). Authors: arXiv listing;
        # the README BibTeX gives the first ten and "others".
        _p(
            "2510.15110",
            "DLER: Doing Length pEnalty Right - Incentivizing More Intelligence per Token via Reinforcement Learning",
            "Liu, Shih-Yang and Dong, Xin and Lu, Ximing and Diao, Shizhe and Liu, Mingjie and Chen, Min-Hung and Yin, "
            "Hongxu and Wang, Yu-Chiang Frank and Cheng, Kwang-Ting and Choi, Yejin and Kautz, Jan and Molchanov, "
            "Pavlo",
        ),
        # Title: README of MBZUAI-Paris/Frugal-Thinking and arXiv. Authors: arXiv listing (the README has "et al.").
        _p(
            "2511.01937",
            "Shorter but not Worse: Frugal Reasoning via Easy Samples as Length Regularizers in Math RLVR",
            "Bounhar, Abdelaziz and Abdine, Hadi and Dufraisse, Evan and Chamma, Ahmad and Mohamed, Amr and Bouch, "
            "Dani and Vazirgiannis, Michalis and Shang, Guokan",
        ),
        # README of U-rara/DOT.
        _p(
            "2601.03969",
            "Anti-Length Shift: Dynamic Outlier Truncation for Training Efficient Reasoning Models",
            "Wu, Wei and Chen, Liyi and Xiao, Congxi and Wang, Tianfu and Wang, Qimeng and Lu, Chengqiang and Gao, Yan "
            "and Wu, Yi and Hu, Yao and Xiong, Hui",
        ),
        # README of NVlabs/GDPO.
        _p(
            "2601.05242",
            "GDPO: Group reward-Decoupled Normalization Policy Optimization for Multi-reward RL Optimization",
            "Liu, Shih-Yang and Dong, Xin and Lu, Ximing and Diao, Shizhe and Belcak, Peter and Liu, Mingjie and "
            "Chen, Min-Hung and Yin, Hongxu and Wang, Yu-Chiang Frank and Cheng, Kwang-Ting and Choi, Yejin and "
            "Kautz, Jan and Molchanov, Pavlo",
        ),
        # Merges (`trl-efficient merge`). arXiv listing (v4) for the title; the first authors from the paper's first
        # page (the seed document 004), the rest as "others".
        _p("2309.06256", "Mitigating the Alignment Tax of RLHF", "Lin, Yong and Lin, Hangyu and Xiong, Wei and others"),
        # arXiv listing; PEFT's `merge_and_unload` implements its merge.
        _p("2106.09685", "LoRA: Low-Rank Adaptation of Large Language Models", "Hu, Edward J. and others"),
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
