"""trl-efficient-testbed: the comparison instrument of trl-efficient.

It measures the library's recipes from outside, through its public names: each recipe trained from the same
over-thinking base model of the library's synthetic world (`trl_efficient.overthinking`, the `testbed:` model scheme),
evaluated on the same tasks and sampling streams, and judged by checks fixed before the runs (`protocol.yaml`):
looks and their error spending, controls, the Benjamini-Hochberg correction, confirmation on unseen seeds, sweeps,
agreement with the literature (`literature.yaml`).

Install it from a checkout of trl-efficient with `pip install -e ./testbed`; it adds `trl-efficient testbed ...`
(entry point `testbed` of the group `trl_efficient.commands`) and its own `trl-efficient-testbed` command. The library
never imports it (an import-linter contract); it registers its pinned base models (`testbed:v2`, `testbed:v3`) with
the library through the entry-point group `trl_efficient.plugins`, which `trl_efficient.api.register_everything`
loads.

- `specs`: what the instrument declares per recipe (scale rule, paper lengths, family, claims), by recipe name;
- `scale`: the one rule that brings a paper's length constants to the testbed's size;
- `runner`, `jobs`, `training`: train and measure; `checks`, `verdicts`, `protocol`, `stats`: judge;
- `sweep`, `matched`, `literature`, `prompted`, `headroom`, `report`, `scorecard`, `plots`: the readings;
- `cli`: `trl-efficient testbed {base,eval,compare,sweep,...}`.
"""

from __future__ import annotations

import os

from trl_efficient.overthinking import PINNED_WEIGHTS

__version__ = "0.1.0"

PINNED_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pinned")

for _size in ("v2", "v3"):  # weights trained once under ATEN_CPU_CAPABILITY=avx2 (docs/testbed.md)
    PINNED_WEIGHTS.register(_size, os.path.join(PINNED_DIR, _size))
