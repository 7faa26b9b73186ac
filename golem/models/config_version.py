"""Config versions: golem.toml + STRATEGY.md hashed into one version the golem runs on.

The golem runs on exactly one version at a time: GolemWorkflow holds it, hands it to every tick, and the
worker's activities (the safety layer included) read the config the tick carries, never the file. A new
version reaches a running golem only through the workflow's `apply_config` update, whose validator
refuses a bad one (the old version keeps running). Pure functions only: the workflow's validator and the
CLI compute the same hash from the same table.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, Field
from pydantic_core import to_jsonable_python

from golem.models.config import ConfigError, GolemConfig, parse_config_table


class ConfigChange(BaseModel):
    """The `apply_config` update's input: golem.toml's table (paths resolved, not yet validated: the
    workflow's validator is the authority) and the sha256 of the STRATEGY.md that goes with it. The
    strategy's text stays on the golem's disk (`<data>/config-versions/`), found by the version."""

    config: dict[str, Any]
    strategy_sha256: str = ""
    source: str = ""  # who sent it: "golem run", "golem config apply", a test


class ConfigVersionInfo(BaseModel):
    """The version a golem runs on, and since when (carried across continue-as-new)."""

    version: str = ""  # config_version(config, strategy_sha256); "" = started before versions existed
    strategy_sha256: str = ""
    applied_at_tick: int = 0  # the first tick that ran on it
    applied_at: str = ""  # workflow time the version was taken (ISO-8601)
    previous: str = ""  # the version it replaced
    source: str = ""


class ConfigApplied(BaseModel):
    """The update's answer: the version now running and the keys that changed."""

    version: str
    previous: str
    effective_from_tick: int
    changed: list[str] = Field(default_factory=list)  # "[section.key] old -> new"


class RunningConfig(BaseModel):
    """`config_version` query: the running version and its whole config (for `golem config show|diff`)."""

    info: ConfigVersionInfo
    config: GolemConfig


def config_version(config: GolemConfig, strategy_sha256: str) -> str:
    """sha256 over the validated config (canonical JSON, defaults filled in) and STRATEGY.md's sha256:
    a comment or key order in the file does not make a new version, a changed value does."""
    body = json.dumps({"config": config.model_dump(mode="json"), "strategy_sha256": strategy_sha256},
                      sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()


def strategy_sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def short(version: str) -> str:
    return version[:12] if version else "(unversioned)"


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def config_diff(old: GolemConfig, new: GolemConfig) -> list[str]:
    """Every key whose value differs, as "[section.key] old -> new" (defaults filled in on both sides)."""
    a, b = _flatten(old.model_dump(mode="json")), _flatten(new.model_dump(mode="json"))
    # The dump leaves late sections and keys out at their defaults: a key one side omits is read off its model.
    for side, model in ((a, old), (b, new)):
        for key in (set(a) | set(b)) - set(side):
            side[key] = _attribute(model, key)
    return [f"[{k}] {json.dumps(a.get(k))} -> {json.dumps(b.get(k))}" for k in sorted(set(a) | set(b))
            if a.get(k) != b.get(k)]


def _attribute(model: Any, dotted: str) -> Any:
    value = model
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else getattr(value, part, None)
    return to_jsonable_python(value)


def validate_change(running: GolemConfig | None, change: ConfigChange) -> GolemConfig:
    """The new config if it may replace the running one; ValueError naming the key otherwise. A golem's id
    names its workflow, task queue and data: it cannot change under a running golem."""
    try:
        new = parse_config_table(change.config, "golem.toml")
    except ConfigError as err:
        raise ValueError(str(err)) from None
    if running is not None and new.golem.id != running.golem.id:
        raise ValueError(f"golem.toml: [golem.id] cannot change on a running golem ({running.golem.id!r} -> "
                         f"{new.golem.id!r}); start a new golem with its own data dir instead")
    if change.strategy_sha256 and len(change.strategy_sha256) != 64:
        raise ValueError("strategy_sha256 must be a sha256 hex digest of STRATEGY.md")
    return new
