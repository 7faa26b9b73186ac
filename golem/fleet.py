"""The placement registry of a host's data dir: which golems live here (`<data>/golems/<id>/`), on which host.

One SQLite file, `<data>/fleet.sqlite`, written by `golem spawn` / `import` / `stop` / `export` and read by the host's
worker, so a golem's ticks run where its data is (docs/design/fleet.md). Plain SQLite: the CLI reads it without
Temporal.
"""

from __future__ import annotations

import os
import re
import socket
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from golem.layout import DataLayout

ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.]{0,62}$")  # no "-": ids.golem_of splits workflow ids on it


def default_host() -> str:
    """This machine's host name in the fleet: GOLEM_HOST, else the system's host name."""
    return os.environ.get("GOLEM_HOST") or socket.gethostname().split(".")[0] or "local"


def check_golem_id(golem_id: str) -> str:
    if not ID_PATTERN.match(golem_id):
        raise ValueError(f"golem id {golem_id!r}: use letters, digits, '_' or '.' (no '-': a golem's workflow ids "
                         f"are golem-<id>-tick-<n>, and the host finds the golem in them), at most 63 characters")
    return golem_id


@dataclass(frozen=True)
class Placement:
    golem_id: str
    host: str
    status: str  # placed | stopped | moved
    kind: str  # the golem's workflow kind: golem-instance
    added_at: str

    @property
    def running(self) -> bool:
        return self.status == "placed"


class FleetRegistry:
    """`<data>/fleet.sqlite`: one row per golem ever placed on this data dir."""

    def __init__(self, data: Path | str) -> None:
        self.root = Path(data)
        self.path = self.root / "fleet.sqlite"

    def _db(self) -> sqlite3.Connection:
        self.root.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=10)
        db.execute("CREATE TABLE IF NOT EXISTS golems (id TEXT PRIMARY KEY, host TEXT NOT NULL, status TEXT NOT NULL,"
                   " kind TEXT NOT NULL, added_at TEXT NOT NULL)")
        return db

    def layout(self, golem_id: str) -> DataLayout:
        """The golem's data dir under this host's: `<data>/golems/<id>/`."""
        return DataLayout(self.root / "golems" / golem_id)

    def home(self, golem_id: str) -> Path:
        """The golem's own home (golem.toml, STRATEGY.md), inside its data dir so a move carries both."""
        return self.layout(golem_id).root / "home"

    def place(self, golem_id: str, host: str, kind: str = "golem-instance") -> Placement:
        check_golem_id(golem_id)
        at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        with closing(self._db()) as db, db:
            db.execute("INSERT INTO golems VALUES (?, ?, 'placed', ?, ?) ON CONFLICT(id) DO UPDATE SET host = "
                       "excluded.host, status = 'placed', kind = excluded.kind", (golem_id, host, kind, at))
        placed = self.get(golem_id)
        assert placed is not None
        return placed

    def mark(self, golem_id: str, status: str) -> None:
        with closing(self._db()) as db, db:
            if db.execute("UPDATE golems SET status = ? WHERE id = ?", (status, golem_id)).rowcount == 0:
                raise KeyError(golem_id)

    def get(self, golem_id: str) -> Placement | None:
        with closing(self._db()) as db:
            row = db.execute("SELECT id, host, status, kind, added_at FROM golems WHERE id = ?",
                             (golem_id,)).fetchone()
        return Placement(*row) if row else None

    def all(self, host: str | None = None) -> list[Placement]:
        with closing(self._db()) as db:
            rows = db.execute("SELECT id, host, status, kind, added_at FROM golems ORDER BY id").fetchall()
        return [Placement(*r) for r in rows if host is None or r[1] == host]


HOME_FILES = ("golem.toml", "STRATEGY.md", "HEARTBEAT.md")


def prepare_home(registry: FleetRegistry, golem_id: str, template: Path, *, key_env: str | None = None) -> Path:
    """The golem's own home, copied from `template` (golem.toml with [golem] id = golem_id, its files, strategies/);
    the host's resolved address book (`<data>/deployment.json`) goes into its data dir. Returns the home."""
    import shutil

    import tomli_w

    from golem.models.config import read_config_table

    check_golem_id(golem_id)
    home, data = registry.home(golem_id), registry.layout(golem_id).root
    if (home / "golem.toml").exists():
        raise FileExistsError(f"{home / 'golem.toml'} exists: golem {golem_id} already has a home on this host")
    raw = read_config_table(template / "golem.toml")
    raw.setdefault("golem", {}).update({"id": golem_id, "home": "."})
    if key_env:  # the env var its worker reads the golem's key from (never the key itself)
        raw.setdefault("chain", {})["key_env"] = key_env
    home.mkdir(parents=True, exist_ok=True)
    (home / "golem.toml").write_text(tomli_w.dumps(raw))
    for name in HOME_FILES[1:]:
        if (template / name).exists():
            shutil.copy(template / name, home / name)
    if (template / "strategies").is_dir():
        shutil.copytree(template / "strategies", home / "strategies")
    book = registry.root / "deployment.json"
    if book.exists() and not (data / "deployment.json").exists():
        shutil.copy(book, data / "deployment.json")
    return home
