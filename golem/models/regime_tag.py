"""A tick's regime tag (its computation: golem/cognition/regime_tag.py; docs/design/learning.md#the-regime-tag)."""

from __future__ import annotations

from pydantic import BaseModel


class RegimeTag(BaseModel):
    """One tick's regime cells (None: not measurable yet) and the figures behind them."""

    volatility_quintile: int | None = None  # 1 calmest … 5 wildest, against the golem's own price history
    trend: str | None = None  # up | down | range
    gas_band: str | None = None  # low | normal | high | spike
    liquidity_band: str | None = None  # deep | normal | thin | crisis
    volatility: float | None = None  # σ of the last VOL_WINDOW returns
    gas_ratio: float | None = None  # gas price / median of the recent gas history
    price_impact: float | None = None  # of selling the exposure into the pool

    @property
    def cell(self) -> str:
        """The tag as one string (episodes, entries, the ledger): `v3/down/gas-normal/liq-deep`, `?` unmeasured."""
        q = "?" if self.volatility_quintile is None else str(self.volatility_quintile)
        return f"v{q}/{self.trend or '?'}/gas-{self.gas_band or '?'}/liq-{self.liquidity_band or '?'}"
