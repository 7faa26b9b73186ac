"""The Grimoire opened outside the worker — by `golem grimoire`, the dashboard's search box and bench/eval_memory.py:
the worker's store layout, the embedder golem.toml names, and retrieval as an owner asks it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from golem.errors import UserError
from golem.layout import DataLayout

if TYPE_CHECKING:
    from golem.grimoire.episodes.store import EpisodeStore
    from golem.grimoire.retrieval import RetrievalResult
    from golem.grimoire.semantic.store import SemanticStore
    from golem.grimoire.store.embeddings import Embedder


def configured_embedder(home: Path | None) -> Embedder:
    """The embedder golem.toml in `home` names ([grimoire] embedder); the offline default without a golem.toml."""
    from golem.grimoire.store.embeddings import EmbedderUnavailable, default_embedder, make_embedder
    from golem.models.config import ConfigError, load_config

    if home is None or not (Path(home) / "golem.toml").exists():
        return default_embedder()
    try:
        return make_embedder(load_config(Path(home) / "golem.toml"))
    except (ConfigError, EmbedderUnavailable) as err:
        raise UserError(str(err)) from None


def configured_floor(home: Path | None) -> float | None:
    """[grimoire] semantic_floor from golem.toml in `home`; None → the embedder's calibrated floor."""
    from golem.models.config import ConfigError, load_config

    if home is None or not (Path(home) / "golem.toml").exists():
        return None
    try:
        return load_config(Path(home) / "golem.toml").grimoire.semantic_floor
    except ConfigError as err:
        raise UserError(str(err)) from None


def open_stores(data_dir: Path, home: Path | None = None, *, on_model_switch: str = "error",
                reading: bool = False) -> tuple[EpisodeStore, SemanticStore]:
    """The worker's layout: <data>/grimoire/{episodes.lance, semantic.sqlite, semantic.lance}, opened with the
    embedder configured in `home` (see configured_embedder). Opening never re-embeds as a side effect:
    with on_model_switch="error" a store embedded with another model is a UserError naming
    `golem grimoire reembed`; "ignore" opens it anyway for inspection. `reading`: the data dir must exist
    (a command that only reads never creates one: a typo in --data would read as an empty memory)."""
    from golem.grimoire.episodes.store import EpisodeStore
    from golem.grimoire.semantic.store import SemanticStore

    layout = DataLayout(data_dir)
    emb = configured_embedder(home)
    if reading and not Path(data_dir).is_dir():
        raise UserError(f"no data directory at {data_dir}: point --data (or GOLEM_DATA) at the golem's data dir; "
                        "`golem run` creates it")
    try:
        return (EpisodeStore(layout.episodes, emb, on_model_switch=on_model_switch),
                SemanticStore(layout.semantic_db, layout.semantic_vectors, emb, on_model_switch=on_model_switch))
    except ValueError as err:
        raise UserError(str(err)) from None


def latest_tick(episodes: EpisodeStore) -> int:
    """The newest episode's tick: "now" for a search that names no tick."""
    return max((e.tick for e in episodes.all()), default=0)


def search(episodes: EpisodeStore, semantic: SemanticStore, query: str, *, regime: str, tick: int, k: int = 5, budget: int = 500,
           floor: float | None = None, as_of: int | None = None, as_known_now: bool = False,
           action: bool | None = None) -> RetrievalResult:
    """What `golem grimoire search` runs (and bench/eval_memory.py scores): retrieval as an owner's steer would
    ask it (no Self-RAG skip), nothing logged, nothing marked accessed. `tick` is now; `as_of` the valid time asked
    about (None: the earlier tick the question names — "as of tick 8,000", "30 ticks ago" — as the retrieve step reads
    an owner's steer, else `tick`); `action` None reads it from the question's text."""
    from golem.grimoire.retrieval import past_tick_of, retrieve_for_tick

    if as_of is None:
        as_of = past_tick_of(query, tick)
    return retrieve_for_tick(episodes, semantic, query, regime=regime, tick=tick, k=k, token_budget=budget,
                             steered=True, log=False, floor=floor, as_of=as_of, as_known_now=as_known_now,
                             action=action)
