r"""
The testbed's protocol, fixed before the runs (`protocol.yaml` next to this module; issue 32): margins, the verdict
rule, the looks and their error spending, the false-discovery-rate correction across the checks, and the controls.

- `load()` / `sha256()`: the file and the first 16 hex digits of its SHA-256, which every run file written since
  records (`jobs._run`: `protocol_sha256`, with `versions`, the trl / transformers / torch versions) and
  `compare.json` records beside its verdicts.
- `nominal_levels(K)`: the one-sided nominal level of each of K looks under the file's error spending (Pocock or
  O'Brien-Fleming critical values for K = 5 looks at two-sided alpha 0.05, Jennison & Turnbull 2000, Table 2.1; other
  K: Pocock's constant from the same table). A look-k interval is the (1 - 2 a_k) interval.
- `benjamini_hochberg(p)`: the BH-adjusted p-values (q-values) of a family.
- `matching_control(recipe)` / `CONTROL_JOBS`: the control runs (GRPO under a recipe's prompts or at its cap).
- `row_spec(name)` / `row_settings(name, settings)`: a row trained otherwise than the comparison (protocol 4: a recipe
  with a config, its own steps, its own check and negative controls; `rows`) or a matching control: what it trains.

>>> [round(a, 4) for a in nominal_levels(5, "pocock")]
[0.0079, 0.0079, 0.0079, 0.0079, 0.0079]
>>> [round(a, 5) for a in nominal_levels(5, "obrien-fleming")]
[0.0, 0.00063, 0.00422, 0.01128, 0.02068]
>>> [round(q, 3) for q in benjamini_hochberg([0.01, 0.04, 0.03, 0.5])]  # 0.01*4/1, 0.03*4/2 -> 0.04*4/3, 0.5
[0.04, 0.053, 0.053, 0.5]
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
from typing import Any

from .specs import BASE_RECIPE

__all__ = [
    "CONTROL_JOBS",
    "PROTOCOL_PATH",
    "benjamini_hochberg",
    "control_of",
    "library_versions",
    "last_look",
    "load",
    "look_index",
    "matching_control",
    "nominal_level",
    "nominal_levels",
    "repeated_p",
    "row_check",
    "row_in_comparison",
    "row_max_seeds",
    "row_negative_controls",
    "row_settings",
    "row_spec",
    "scale_regime",
    "sha256",
]

PROTOCOL_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "protocol.yaml")

# Two-sided alpha = 0.05 critical values for K = 5 equally spaced looks (Jennison & Turnbull 2000, Table 2.1):
# Pocock's constant C_P(5) = 2.413, O'Brien-Fleming's C_B(5) = 2.040 at the last look and C_B sqrt(K / k) before.
POCOCK_C = {1: 1.960, 2: 2.178, 3: 2.289, 4: 2.361, 5: 2.413}
OBRIEN_FLEMING_C = {1: 1.960, 2: 1.977, 3: 2.004, 4: 2.024, 5: 2.040}


@functools.lru_cache(maxsize=4)
def _load(path: str) -> tuple[dict, str]:
    import yaml

    with open(path, "rb") as f:
        data = f.read()
    return yaml.safe_load(data), hashlib.sha256(data).hexdigest()[:16]


def load(path: str = PROTOCOL_PATH) -> dict:
    """The protocol file as a dict."""
    return _load(path)[0]


def sha256(path: str = PROTOCOL_PATH) -> str:
    """The first 16 hex digits of the SHA-256 of the protocol file's bytes."""
    return _load(path)[1]


def library_versions() -> dict[str, str]:
    """The versions of the libraries a run depends on (recorded in every run file since protocol 1)."""
    from importlib.metadata import PackageNotFoundError, version

    import torch
    import transformers
    import trl

    try:  # the installed distribution's version (the package root sits above this layer)
        ours = version("trl-efficient")
    except PackageNotFoundError:
        ours = "not installed"
    return {"trl": trl.__version__, "transformers": transformers.__version__, "torch": torch.__version__,
            "trl_efficient": ours}  # fmt: skip


def _normal_sf(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2))


def nominal_levels(looks: int, method: str | None = None) -> list[float]:
    """The nominal one-sided level of each of `looks` looks (two-sided overall alpha 0.05: 0.025 per side) under
    `method` (`pocock` or `obrien-fleming`; default: the protocol file's)."""
    method = method or load()["error_spending"]["method"]
    if float(load()["error_spending"]["alpha"]) != 0.05:
        raise ValueError("the tabulated critical values are for alpha = 0.05.")
    k = min(max(int(looks), 1), 5)
    if method == "pocock":
        return [_normal_sf(POCOCK_C[k])] * looks
    if method == "obrien-fleming":
        return [_normal_sf(OBRIEN_FLEMING_C[k] * math.sqrt(looks / (i + 1))) for i in range(looks)]
    raise ValueError(f"error_spending.method must be 'pocock' or 'obrien-fleming', got {method!r}.")


def look_sizes() -> list[int]:
    """The seeds at each look of the design: `seeds_per_look`, twice it, ... up to `max_seeds` (their number sets
    the nominal levels; the comparison may end before the last, `last_look`)."""
    looks = load()["looks"]
    step, top = int(looks["seeds_per_look"]), int(looks["max_seeds"])
    sizes = [step]
    while sizes[-1] < top:
        sizes.append(min(sizes[-1] + step, top))
    return sizes


def last_look() -> int:
    """The seeds at which every row's looks end (`looks.end_at`; protocol 13: 6 of the design's 3, 6, 9, the third
    look's error left unspent), the design's `max_seeds` when the file sets none.

    >>> last_look(), look_sizes()
    (6, [3, 6, 9])
    """
    looks = load()["looks"]
    return int(looks.get("end_at") or looks["max_seeds"])


def look_index(seeds: int) -> int:
    """The look (0-based) a row with `seeds` training seeds stands at: the first look with at least that many.

    >>> look_index(3), look_index(6), look_index(9), look_index(15), look_index(1)
    (0, 1, 2, 2, 0)
    """
    sizes = look_sizes()
    return next((i for i, s in enumerate(sizes) if seeds <= s), len(sizes) - 1)


def nominal_level(seeds: int) -> float:
    """The one-sided nominal level of the look at which a check over `seeds` seeds is judged."""
    sizes = look_sizes()
    return nominal_levels(len(sizes))[look_index(seeds)]


@functools.lru_cache(maxsize=1)
def _pocock_maxima(looks: int = 5, draws: int = 400_000) -> Any:
    """max_k Z_k of `draws` seeded random walks seen at `looks` equally spaced looks under no effect, sorted."""
    import numpy as np

    rng = np.random.default_rng(20261203)
    walks = np.cumsum(rng.standard_normal((draws, looks)), axis=1) / np.sqrt(np.arange(1, looks + 1))
    return np.sort(walks.max(axis=1))


def repeated_p(p: float, looks: int | None = None) -> float:
    """The look-adjusted (repeated) p-value of a one-sided nominal p-value under Pocock's design: the overall
    one-sided error of the design whose constant boundary is the observed statistic, P(max_k Z_k >= z_(1-p)) over the
    protocol's looks (Jennison & Turnbull 2000, §9.1), by 400,000 seeded random walks; below their resolution the union
    bound K x p. Pocock's nominal level maps to about 0.025: 0.0110 at K = 3 (the tabled 2.289), 0.0079 at K = 5.

    >>> round(repeated_p(0.0110, looks=3), 3), round(repeated_p(0.0079, looks=5), 3), round(repeated_p(0.5), 2)
    (0.025, 0.024, 0.69)
    >>> repeated_p(1.0)
    1.0
    """
    from statistics import NormalDist

    import numpy as np

    if p >= 1.0:
        return 1.0
    looks = looks or len(look_sizes())
    maxima = _pocock_maxima(looks)
    z = NormalDist().inv_cdf(1 - max(p, 1e-12))
    exceed = maxima.size - int(np.searchsorted(maxima, z, side="left"))
    if exceed < 100:  # too few draws to resolve the tail: the union bound over the looks (conservative)
        return min(1.0, looks * p)
    return min(1.0, exceed / maxima.size)


def benjamini_hochberg(p_values: list[float]) -> list[float]:
    """BH-adjusted p-values: q_(i) = min over j >= i of p_(j) m / j (sorted ascending), capped at 1, in input order."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    q = [0.0] * m
    running = 1.0
    for rank in range(m, 0, -1):
        i = order[rank - 1]
        running = min(running, p_values[i] * m / rank)
        q[i] = min(running, 1.0)
    return q


def matching_controls() -> dict[str, dict]:
    return dict(load().get("matching_controls") or {})


CONTROL_JOBS = tuple(matching_controls())  # grpo-prompted, grpo-cap192, grpo-cap230, grpo-kl, brorl-n8


def control_of(name: str) -> dict | None:
    """The protocol entry of a matching-control run name (`grpo-prompted`, ...), `None` for a recipe."""
    return matching_controls().get(name)


def row_spec(name: str) -> dict:
    """The protocol's entry of `name`: a matching control's or a row's of `rows` (protocol 4: `recipe`, `config`,
    `settings`, `check`, `negative_controls`); `{}` for a recipe trained as the comparison trains every recipe.

    >>> row_spec("lisa")["recipe"], row_spec("grpo-kl")["settings"], row_spec("kimi")
    ('grpo', {'max_steps': 120}, {})
    """
    return dict(control_of(name) or (load().get("rows") or {}).get(name) or {})


def row_settings(name: str, settings: Any) -> Any:
    """The `TestbedSettings` `name` trains and is evaluated with: the comparison's, with the row's own `settings`
    (protocol 4: ProRL's longer run) on top; unknown fields fail here, in one line."""
    import dataclasses

    own = row_spec(name).get("settings") or {}
    fields = {f.name for f in dataclasses.fields(settings)}
    unknown = sorted(set(own) - fields)
    if unknown:
        raise ValueError(f"protocol row {name!r}: unknown settings {unknown}; valid: {sorted(fields)}.")
    return dataclasses.replace(settings, **own) if own else settings


def row_check(name: str) -> str | None:
    """The method check a row of `rows` names (`checks.ROW_CHECKS`), `None` when the recipe's own applies."""
    return (load().get("rows") or {}).get(name, {}).get("check")


def row_max_seeds(name: str) -> int:
    """The seeds at which `name`'s looks end: its own `max_seeds` in `rows` (protocol 6: ProRL's and BroRL's rows,
    one look; protocol 13: the rows at twice grpo's cost), else every row's `last_look`.

    >>> row_max_seeds("laser-d"), row_max_seeds("kimi")
    (3, 6)
    """
    value = ((load().get("rows") or {}).get(name) or {}).get("max_seeds")
    return last_look() if value is None else min(int(value), last_look())


def row_negative_controls(name: str) -> list[str]:
    """The negative controls scored on `name`'s check: the row's `negative_controls` when it sets them, else all."""
    entry = (load().get("rows") or {}).get(name) or {}
    every = list(load().get("negative_controls") or [])
    return every if entry.get("negative_controls") is None else [c for c in every if c in entry["negative_controls"]]


def scale_regime(base_model: str | None) -> str:
    """Under which scale rule a comparison on `base_model` trains its recipes: `"one-rule"` (`scale.apply_one_rule`,
    world v3) or `"recipe"` (each recipe's own rule, world v2 and the small worlds; also when no base model is given).

    >>> scale_regime("testbed:v3"), scale_regime("testbed:v2"), scale_regime(None)
    ('one-rule', 'recipe', 'recipe')
    """
    from .scaling import ONE_RULE_BASE_MEANS

    return "one-rule" if base_model in ONE_RULE_BASE_MEANS else "recipe"


def row_in_comparison(name: str, base_model: str | None = None) -> bool:
    """Whether the comparison on `base_model` judges the row `name`: a row that names a scale rule (`scale`, as a
    cap-matched control does; protocol 11: ProRL's and BroRL's rows, world v2 only) stands only for comparisons under
    it (`scale_regime`), one that names `none` for none (protocol 13: ProRL's and BroRL's rows, which `trl-efficient
    testbed compare --recipes grpo prorl brorl` still judges on their own); every other row is in every comparison.

    >>> row_in_comparison("prorl", "testbed:v2"), row_in_comparison("prorl", "testbed:v3"), row_in_comparison("kimi")
    (False, False, True)
    """
    scale = row_spec(name).get("scale")
    return scale is None or scale == scale_regime(base_model)


def matching_control(recipe: str, base_model: str | None = None) -> str | None:
    """The matching control of `recipe`'s check in a comparison on `base_model`: a control run's name, `"grpo"`, or
    `None` (the check keeps its reference). A control that trains at a recipe's training cap names the scale rule that
    sets that cap (`scale`: `recipe` or `one-rule`, `scale_regime`) and stands only for comparisons under it.

    >>> matching_control("dler"), matching_control("dler", "testbed:v3"), matching_control("kimi", "testbed:v3")
    ('grpo-cap192', 'grpo-cap116', None)
    """
    regime = scale_regime(base_model)
    for name, entry in matching_controls().items():
        if recipe in (entry.get("for") or []) and entry.get("scale", regime) == regime:
            return name
    if recipe in (load().get("reference_is_grpo") or []):
        return BASE_RECIPE
    return None


def fdr_level() -> float:
    """The family's false-discovery level (one-sided) of the Benjamini-Hochberg step-up; protocol 1 used the looks'
    nominal level (0.0079) on nominal p-values."""
    fdr = load()["false_discovery_rate"]
    return nominal_levels(len(look_sizes()))[0] if fdr.get("level") == "nominal" else float(fdr["level"])


def compatible_runs() -> set[str]:
    """The protocol hashes whose run files this protocol reads as its own: itself, and the earlier protocols it lists
    (`compatible_runs`) whose changes only judge runs and do not change them."""
    return {sha256(), *[str(h) for h in load().get("compatible_runs") or []]}


def describe() -> dict[str, Any]:
    """What `compare.json` records of the protocol: its hash, version, spending and FDR method, the design's looks
    and the one every row's looks end at."""
    data = load()
    return {"sha256": sha256(), "version": data["version"], "error_spending": data["error_spending"],
            "false_discovery_rate": data["false_discovery_rate"], "margins": data["margins"],
            "nominal_levels": nominal_levels(len(look_sizes())), "looks": look_sizes(),
            "last_look": last_look()}  # fmt: skip
