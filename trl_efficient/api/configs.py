"""Where `trl-efficient train --config VALUE` reads its YAML: a path, or the name of a recipe YAML shipped in the
package (`kimi`, `kimi.yaml`, or the README's `configs/kimi.yaml`), and the one reader of those files. Light: no
torch, TRL or transformers (`trl-efficient recipes show` uses it)."""

from __future__ import annotations

import logging
import os
from importlib import resources

from ..core.errors import UserError, one_line

logger = logging.getLogger("trl_efficient")


def packaged_config(name: str) -> str:
    """Path of `configs/<name>.yaml`, from the working directory's `configs/` if present, else the package's."""
    local = os.path.join("configs", f"{name}.yaml")
    if os.path.exists(local):
        return local
    return str(resources.files("trl_efficient.recipes").joinpath("configs", f"{name}.yaml"))


def shipped_configs() -> list[str]:
    """Names of the recipe YAMLs that ship in the package (`recipes/configs/*.yaml`: every registered recipe, plus
    `quickstart` and `smoke`), sorted."""
    root = resources.files("trl_efficient.recipes").joinpath("configs")
    return sorted(entry.name[: -len(".yaml")] for entry in root.iterdir() if entry.name.endswith(".yaml"))


def shipped_config_name(value: str) -> str | None:
    """The shipped recipe YAML that `value` names, or None: `kimi`, `kimi.yaml` or `configs/kimi.yaml` (the form the
    README and the YAML headers use) name `kimi`; a path in any other folder names none.

    >>> shipped_config_name("configs/kimi.yaml"), shipped_config_name("kimi"), shipped_config_name("my/kimi.yaml")
    ('kimi', 'kimi', None)
    """
    folder, name = os.path.split(value)
    if os.path.normpath(folder or ".") not in (".", "configs"):
        return None
    for suffix in (".yaml", ".yml"):
        name = name.removesuffix(suffix)
    return name if name in shipped_configs() else None


def resolve_config(value: str) -> str:
    """The YAML file `--config value` reads: an existing path wins; else the package's copy of the shipped recipe
    YAML that `value` names (`shipped_config_name`), so `--config kimi` and `--config configs/kimi.yaml` work from any
    directory after `pip install`. Anything else is returned as given (`read_config_file` names it as missing)."""
    if os.path.exists(value):
        return value
    name = shipped_config_name(value)
    if name is None:
        return value
    path = str(resources.files("trl_efficient.recipes").joinpath("configs", f"{name}.yaml"))
    if os.path.dirname(value):  # a path that is not here: say which file is read instead
        logger.info("%s is not in this directory: reading the shipped recipe YAML %s", value, path)
    return path


CONFIG_HINT = (
    "pass a shipped recipe by name, e.g. --config kimi (`trl-efficient recipes` lists them, `trl-efficient recipes "
    "show kimi` prints one to copy and edit), or the path of a YAML file"
)


def read_config_file(path: str) -> dict:
    """The YAML mapping in `path`; a missing, unreadable or malformed file raises `UserError` naming it."""
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except FileNotFoundError as err:
        raise UserError(f"config file not found: {path} ({CONFIG_HINT})") from err
    except IsADirectoryError as err:
        raise UserError(f"cannot read config file {path}: it is a directory (pass --config <a YAML file>)") from err
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"cannot read config file {path}: {getattr(err, 'strerror', None) or err}") from err
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or one_line(err)
        raise UserError(f"{path}: invalid YAML{where}: {problem}; fix the file's syntax") from err
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UserError(f"{path}: a config file must hold a YAML mapping of field: value, got {type(data).__name__}")
    return data
