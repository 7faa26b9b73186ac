"""The regime vocabulary entries are scoped with: the regimes the golem detects — trending_up, trending_down,
volatile, range_bound, unknown — so retrieval can match an entry's scope to the tick's regime. Labels from elsewhere
(bull, bear, sideways, high/low volatility, crisis; the backtest paths' calm and crash) map onto it; anything else is
refused with the list of what is accepted, never kept as a string the retriever cannot match.
"""

from __future__ import annotations

import re

from golem.models.enums import MarketRegime

VOCABULARY = tuple(r.value for r in MarketRegime)
# ours: the nearest detected regime for each foreign label. A crash is volatility first (the detector reads the
# backtest label `crash` as trending_down or volatile; a falling market is trending_down's own label).
ALIASES: dict[str, str] = {
    "bull": "trending_up", "bullish": "trending_up", "uptrend": "trending_up", "trend_up": "trending_up",
    "bear": "trending_down", "bearish": "trending_down", "downtrend": "trending_down", "trend_down": "trending_down",
    "sideways": "range_bound", "calm": "range_bound", "low_vol": "range_bound", "lowvol": "range_bound",
    "range": "range_bound", "ranging": "range_bound", "rangebound": "range_bound",
    "high_vol": "volatile", "highvol": "volatile", "crisis": "volatile", "crash": "volatile", "whipsaw": "volatile",
}
UNSCOPED = {"", "none", "null", "any", "all", "global"}
# A question that names a regime asks about it, whatever the tick's: the detector's labels and the aliases that mean
# nothing else in DeFi text ("range", "crash" and "calm" do: an LP range, a price crash of any regime).
_NAMED = re.compile(r"\b(volatile|trending[ _-]up|trending[ _-]down|range[ _-]bound|rangebound|uptrend(?:ing)?|"
                    r"downtrend(?:ing)?|sideways|bull(?:ish)?|bear(?:ish)?)\b", re.IGNORECASE)
# ... and a market described in plain words: "a falling market", "when the market was wild" (the adjective must be
# about the market: a falling health factor names no regime).
_DESCRIBED = {"rising": "trending_up", "climbing": "trending_up", "falling": "trending_down",
              "dropping": "trending_down", "sliding": "trending_down", "wild": "volatile", "turbulent": "volatile",
              "choppy": "volatile", "swinging": "volatile", "flat": "range_bound", "quiet": "range_bound"}
_MARKET = re.compile(r"\b(?:(%s)\s+market|market\s+(?:is|was|has\s+been|keeps|kept)\s+(%s))\b"
                     % ("|".join(_DESCRIBED), "|".join(_DESCRIBED)), re.IGNORECASE)


def normalise_regime(label: str | None) -> str | None:
    """An entry's `market_regime` in the detector's vocabulary; None = unscoped (regime-independent). Raises ValueError
    naming the accepted labels for anything it cannot map."""
    if label is None:
        return None
    key = str(label).strip().lower().replace("-", "_").replace(" ", "_")
    if key in UNSCOPED:
        return None
    if key in VOCABULARY:
        return key
    if key in ALIASES:
        return ALIASES[key]
    raise ValueError(
        f"market_regime {label!r} is not a regime the golem detects; use one of {', '.join(VOCABULARY)} "
        f"(or null for an unscoped entry); mapped on the way in: {', '.join(sorted(ALIASES))}")


def regime_named_in(text: str) -> str | None:
    """The one regime a question names ("in a volatile market", "while trending down"); None when it names none or
    more than one."""
    found = {normalise_regime(re.sub(r"ing$", "", m.group(1).lower()) if m.group(1).lower().endswith("trending")
                              else m.group(1)) for m in _NAMED.finditer(text or "")}
    found |= {_DESCRIBED[(m.group(1) or m.group(2)).lower()] for m in _MARKET.finditer(text or "")}
    return found.pop() if len(found) == 1 else None
