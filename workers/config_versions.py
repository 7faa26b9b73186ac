"""Config versions on disk and on the wire.

A version = golem.toml + STRATEGY.md, hashed (golem.models.config_version.config_version). Every version the
golem may run on is kept under `<data>/config-versions/<version>.json` (the validated config and the
STRATEGY.md text), so a worker resolves a tick's STRATEGY.md by the version the tick carries rather than
by whatever the file says now. A new version reaches a running golem only through GolemWorkflow's
`apply_config` update (validated there; refused whole, with the key named, or taken whole).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowUpdateFailedError

from golem.models.config import ConfigError, GolemConfig, parse_config_table, read_config_table
from golem.ids import golem_workflow_id
from golem.inference.strategies import read_bundle
from golem.layout import DataLayout
from golem.models.config_version import (
    ConfigApplied,
    ConfigChange,
    ConfigVersionInfo,
    RunningConfig,
    config_version,
    strategy_sha256,
)


class ConfigRefused(Exception):
    """The running golem refused a config (its validator named the key); the old version keeps running."""


@dataclass
class LocalVersion:
    """golem.toml + STRATEGY.md as they are on disk now."""

    table: dict[str, Any]  # golem.toml's table, paths resolved, not validated
    strategy_text: str
    config: GolemConfig | None = None  # None: the file does not validate (the error in `error`)
    error: str = ""

    @property
    def strategy_sha256(self) -> str:
        return strategy_sha256(self.strategy_text)

    @property
    def version(self) -> str:
        return config_version(self.config, self.strategy_sha256) if self.config is not None else ""

    def change(self, source: str) -> ConfigChange:
        return ConfigChange(config=self.table, strategy_sha256=self.strategy_sha256, source=source)


def read_strategy(home: str | Path) -> str:
    """STRATEGY.md's text ("" when there is none: the tick's decide step reports that), and the files under
    strategies/ after it (golem.inference.strategies.bundle: with none, STRATEGY.md's text as it is)."""
    return read_bundle(home)


def local_version(toml_path: str | Path) -> LocalVersion:
    """Read golem.toml (a file that does not parse as TOML raises ConfigError) and the STRATEGY.md of the
    home it names; a table that does not validate comes back with `error` set, for the workflow to refuse."""
    table = read_config_table(toml_path)
    try:
        config = parse_config_table(json.loads(json.dumps(table, default=str)), str(toml_path))
    except ConfigError as err:
        home = table.get("golem", {}).get("home") if isinstance(table.get("golem"), dict) else None
        return LocalVersion(table=table, strategy_text=read_strategy(home or Path(toml_path).parent), error=str(err))
    return LocalVersion(table=table, strategy_text=read_strategy(config.golem.home), config=config)


def version_of(config: GolemConfig) -> LocalVersion:
    """The version of an already validated config with the STRATEGY.md in its home."""
    return LocalVersion(table=config.model_dump(mode="json"), strategy_text=read_strategy(config.golem.home),
                        config=config)


def save_version(data: DataLayout | str | Path, local: LocalVersion) -> str:
    """Keep this version on the golem's disk (idempotent: the file is named by its hash)."""
    if local.config is None:
        return ""
    folder = DataLayout.of(data).config_versions
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{local.version}.json"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({
            "version": local.version, "strategy_sha256": local.strategy_sha256,
            "config": local.config.model_dump(mode="json"), "strategy": local.strategy_text,
        }, indent=2))
        tmp.replace(path)
    return local.version


def stored_strategy(data: DataLayout | str | Path, version: str) -> str | None:
    """STRATEGY.md of a stored version, or None when this disk does not hold that version."""
    path = DataLayout.of(data).config_versions / f"{version}.json"
    if not version or not path.exists():
        return None
    strategy = json.loads(path.read_text())["strategy"]
    if not isinstance(strategy, str):
        raise ValueError(f"{path}: its 'strategy' is not STRATEGY.md's text (got {type(strategy).__name__})")
    return strategy


def stored_config(data: DataLayout | str | Path, version: str) -> GolemConfig | None:
    """The validated golem.toml of a stored version, or None when this disk does not hold that version."""
    path = DataLayout.of(data).config_versions / f"{version}.json"
    if not version or not path.exists():
        return None
    return GolemConfig.model_validate(json.loads(path.read_text())["config"])


def start_info(local: LocalVersion, at_tick: int, source: str, previous: RunningConfig | None) -> ConfigVersionInfo:
    """The version a (re)started GolemWorkflow runs on from its first tick."""
    return ConfigVersionInfo(version=local.version, strategy_sha256=local.strategy_sha256, applied_at_tick=at_tick,
                             previous=previous.info.version if previous else "", source=source)


async def running_config(client: Client, golem_id: str) -> RunningConfig | None:
    from workflows.golem import GolemWorkflow

    return await client.get_workflow_handle(golem_workflow_id(golem_id)).query(GolemWorkflow.config_version)


async def apply_version(client: Client, golem_id: str, local: LocalVersion, data_dir: str | Path | None,
                        source: str) -> ConfigApplied:
    """Send this version to the running golem (stored on disk first, so the worker can resolve it).
    ConfigRefused carries the validator's message (the bad key named); the old version keeps running."""
    from workflows.golem import GolemWorkflow

    if data_dir is not None:
        save_version(data_dir, local)
    handle = client.get_workflow_handle(golem_workflow_id(golem_id))
    try:
        return await handle.execute_update(GolemWorkflow.apply_config, local.change(source))
    except WorkflowUpdateFailedError as err:
        cause = err.cause
        raise ConfigRefused(getattr(cause, "message", None) or str(cause or err)) from None
