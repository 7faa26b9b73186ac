"""The DeFi threat detectors' inputs and verdicts: the recent blocks' pool and feed prices the validate step reads,
and what each detector found (sandwich exposure, oracle manipulation, flash-loan-shaped moves).
Why and the thresholds: docs/design/safety.md#defi-threats."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Detector = Literal["sandwich", "oracle_manipulation", "flash_loan"]


class MarketMark(BaseModel):
    """The world's WETH/USDC pair and the ETH/USD feed at the end of one block."""

    block: int
    reserve_weth: float
    reserve_usdc: float
    feed_price: float  # USD per WETH, the feed's answer at that block

    @property
    def pool_price(self) -> float:
        return self.reserve_usdc / self.reserve_weth if self.reserve_weth > 0 else 0.0


class MarketWindow(BaseModel):
    """The last blocks up to the chain's head, oldest first (read by golem.chain.market_window)."""

    marks: list[MarketMark] = Field(default_factory=list)


class ThreatVerdict(BaseModel):
    """One detector's answer for one tick (and one action, for the sandwich check)."""

    detector: Detector
    fired: bool
    # what the cage did about it: none | tightened | clipped | refused | held
    response: str = "none"
    detail: str  # in words, with the figures
    figures: dict[str, float] = Field(default_factory=dict)
    action_index: int | None = None  # the sandwich check's action; None for the market-wide detectors
    source: str | None = None  # the manipulated price: pool | feed


def detector_of(threat: str) -> str:
    """The detector named at the head of a threat line on an action ("sandwich (tightened): …", "flash_loan: …")."""
    return threat.split(" ", 1)[0].split(":", 1)[0]
