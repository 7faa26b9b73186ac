"""A new config version (golem.toml + STRATEGY.md) taken whole by a running golem (the apply_config update)."""

from __future__ import annotations

from dataclasses import dataclass

from golem.models.config import GolemConfig
from golem.models.config_version import (ConfigApplied, ConfigChange, ConfigVersionInfo, config_diff, config_version,
                                         short, validate_change)


@dataclass(frozen=True)
class ConfigSwap:
    config: GolemConfig
    info: ConfigVersionInfo
    note: str  # what changed, for the next tick's record ("" when the version is the one running)
    answer: ConfigApplied


def apply_change(running: GolemConfig, info: ConfigVersionInfo, change: ConfigChange, next_tick: int,
                 now: str) -> ConfigSwap:
    """The version `change` makes, effective from `next_tick`; ValueError naming the key when it is refused."""
    new = validate_change(running, change)
    version = config_version(new, change.strategy_sha256)
    previous = info.version
    if version == previous:
        return ConfigSwap(running, info, "", ConfigApplied(version=version, previous=previous,
                                                           effective_from_tick=info.applied_at_tick))
    changed = config_diff(running, new)
    if change.strategy_sha256 != info.strategy_sha256:
        changed.append(f"[STRATEGY.md] sha256 {info.strategy_sha256[:12] or '?'} -> {change.strategy_sha256[:12]}")
    new_info = ConfigVersionInfo(version=version, strategy_sha256=change.strategy_sha256, applied_at_tick=next_tick,
                                 applied_at=now, previous=previous, source=change.source)
    note = (f"config {short(version)} applied (was {short(previous)}, from {change.source or '?'}): "
            + ("; ".join(changed) or "no value changed"))
    return ConfigSwap(new, new_info, note, ConfigApplied(version=version, previous=previous,
                                                         effective_from_tick=next_tick, changed=changed))
