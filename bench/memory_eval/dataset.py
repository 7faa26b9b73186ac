"""The labelled memory set behind `make eval-memory`: a golem's Grimoire in its own world and 84 questions it asks
itself mid-tick, 12 in each of seven categories. Entries carry supersession chains, near-duplicates, contradicting
low-confidence entries, regime-scoped variants, keyword traps and filler, plus 1,200 episodes.

A question: {id, category, text, regime, tick, gold (groups; any id answers a group), stale (ids that must not be
returned), action (a warning belongs in the top 3), split ("tune" or "held_out")}. `build()` is deterministic
(seeded); `write_jsonl` writes the `golem grimoire import` format.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

NOW = 40_000  # the golem's current tick (~28 days of 60 s ticks)
GOLEM = "eval-golem"
TUNE_PER_CATEGORY = 8

CATEGORIES = ["single_hop", "multi_hop", "as_of", "knowledge_update", "abstention", "regime", "safety"]


def E(id, category, content, tags=(), *, regime=None, conf=0.7, quality=0.6, vf=0, vu=None, created=None,
      decay="regime_conditional", contradicted=0, validated=0, accessed=None):
    created = vf if created is None else created
    return {"id": id, "category": category, "content": content, "confidence": conf, "quality_score": quality,
            "validated_count": validated, "contradicted_count": contradicted, "decay_class": decay,
            "market_regime": regime, "valid_from": vf, "valid_until": vu, "parent_episode_ids": [],
            "tags": list(tags), "provenance": "self_learned", "source": {"golem_id": GOLEM},
            "created_tick": created, "last_accessed_at": created if accessed is None else accessed}


W, H, I, C, S = "warning", "heuristic", "insight", "causal_link", "strategy_fragment"

ENTRIES = [
    # ---- lending: health factor, repay vs collateral ------------------------------------------------------------
    E("repay-vs-collateral", H, "Repaying USDC debt lifts the health factor more per dollar than adding the same value "
      "of WETH collateral, because collateral only counts at its 0.80 liquidation threshold.",
      ["aave", "health-factor", "repay"], conf=0.8, quality=0.8, vf=2_000, decay="structural"),
    E("repay-vs-collateral-dup", H, "Per dollar spent, paying back the USDC borrow improves health factor more than "
      "supplying extra WETH: supplied WETH is discounted by the 80% liquidation threshold.",
      ["aave", "health-factor"], conf=0.6, quality=0.7, vf=9_000, decay="structural"),
    E("repay-vs-collateral-contra", I, "Adding WETH collateral raises health factor faster than repaying USDC debt.",
      ["aave", "health-factor"], conf=0.12, quality=0.4, vf=30_000, contradicted=4, validated=0),
    E("hf-must-floor", W, "MUST keep the health factor at or above 1.3: below it, repay USDC before any other action "
      "(STRATEGY.md hard line).", ["aave", "health-factor", "must"], conf=0.9, quality=0.8, vf=500, decay="structural"),
    E("hf-formula", I, "Health factor = (WETH collateral x oracle price x 0.80 liquidation threshold) / USDC debt; at "
      "10 WETH and 8,000 USDC debt it is 2.0 at 2,000 USDC per WETH and 1.0 at 1,000.",
      ["aave", "health-factor", "formula"], conf=0.9, quality=0.9, vf=100, decay="structural"),
    E("liq-bonus", C, "Being liquidated costs about 5% of the seized WETH: Aave's liquidation bonus goes to the "
      "liquidator, and up to half the debt is closed in one call.", ["aave", "liquidation"], conf=0.8, quality=0.7,
      vf=1_200, decay="structural"),
    E("borrow-more-warning", W, "Do not borrow more USDC while WETH is falling: each extra borrow lowers the health "
      "factor and a further 10% drop can then trigger liquidation.", ["aave", "borrow", "must"], conf=0.75,
      quality=0.7, vf=1_500),
    E("buy-dip-fresh", I, "Buying the WETH dip at 1,850 yesterday returned +4% within six hours.",
      ["swap", "dip"], conf=0.8, quality=0.5, vf=39_500, decay="tactical"),
    E("withdraw-warning", W, "Withdrawing WETH collateral while the health factor is under 1.6 leaves no room for a "
      "10% price drop before liquidation.", ["aave", "withdraw", "health-factor"], conf=0.7, quality=0.7, vf=3_000),
    E("withdraw-fresh", I, "Withdrawals from the Aave market confirm within two blocks on the dev chain.",
      ["aave", "withdraw"], conf=0.8, quality=0.5, vf=39_800, decay="tactical"),
    E("rate-kink", C, "USDC borrow APR jumps once pool utilization passes the 90% optimal-utilization kink, because "
      "the slope-2 rate applies above it.", ["aave", "interest-rate"], conf=0.7, quality=0.7, vf=4_000,
      decay="structural"),
    E("rate-kink-heuristic", H, "When USDC utilization is above 90%, repay part of the borrow: interest compounds at "
      "the steep slope-2 rate until utilization falls.", ["aave", "interest-rate", "repay"], conf=0.6, quality=0.6,
      vf=4_100),
    E("dust-repay", H, "Batch small repayments: repaying less than 200 USDC at a time spends more on gas than it saves "
      "in interest.", ["repay", "gas"], conf=0.6, quality=0.6, vf=6_000, decay="tactical", accessed=36_000),
    # ---- oracle lag ---------------------------------------------------------------------------------------------
    E("oracle-lag-causal", C, "A fast fall in the pool price reaches the Chainlink feed only after its 0.5% deviation "
      "threshold or hourly heartbeat, so the oracle lags the pool by several blocks in a crash.",
      ["oracle", "chainlink", "crash"], conf=0.8, quality=0.8, vf=2_500, decay="structural"),
    E("oracle-lag-hf", C, "While the oracle lags, the health factor Aave reports is computed from the stale feed and "
      "overstates how safe the position is.", ["oracle", "health-factor"], conf=0.7, quality=0.7, vf=2_600),
    E("oracle-lag-heuristic", H, "When pool and oracle disagree, compute the health factor from the pool price too "
      "and act on the lower of the two.", ["oracle", "health-factor"], conf=0.65, quality=0.7, vf=2_700),
    E("circuit-breaker", W, "MUST NOT trade while the pool price deviates more than 5% from the oracle: the fill is at "
      "a stale or manipulated price (circuit breaker).", ["oracle", "swap", "must"], conf=0.9, quality=0.8, vf=800,
      decay="structural"),
    E("oracle-heartbeat-trap", I, "The oracle's answer carries a round id and an updatedAt timestamp.",
      ["oracle"], conf=0.5, quality=0.3, vf=20_000, decay="structural"),
    # ---- gas ------------------------------------------------------------------------------------------------------
    E("gas-night", I, "Base fee is lowest between 02:00 and 04:00 UTC; routine swaps cost about a third of the "
      "daytime gas then.", ["gas", "timing"], conf=0.7, quality=0.7, vf=5_000, decay="tactical", accessed=38_000),
    E("gas-spike-defer", H, "During a gas spike above 10x the usual base fee, defer routine rebalancing swaps: the "
      "gas costs more than the rebalance gains. Never defer a protective repay.", ["gas", "swap", "repay"],
      conf=0.75, quality=0.8, vf=5_500),
    E("gas-spike-cause", C, "Gas spikes on the chain follow large liquidation waves: liquidators bid up priority "
      "fees to win the bonus.", ["gas", "liquidation"], conf=0.6, quality=0.6, vf=7_000),
    E("gas-reverted", H, "A reverted swap still pays its gas; simulate every swap with eth_call before sending it.",
      ["gas", "simulation", "swap"], conf=0.7, quality=0.7, vf=3_300, decay="structural"),
    # ---- swaps, slippage, MEV -------------------------------------------------------------------------------------
    E("slippage-split", H, "A swap larger than 2% of the WETH/USDC pool's reserves pays more than 1% price impact; "
      "split it over several blocks.", ["swap", "slippage", "uniswap"], conf=0.75, quality=0.8, vf=3_500,
      decay="structural"),
    E("slippage-split-dup", H, "Orders over about 2% of pool reserves move the Uniswap price by more than 1%; break "
      "big swaps into pieces.", ["swap", "slippage"], conf=0.55, quality=0.6, vf=21_000, decay="structural"),
    E("sandwich-warning", W, "Swaps sent to the public mempool with slippage tolerance above 1% get sandwiched by "
      "MEV bots.", ["swap", "mev", "slippage"], conf=0.8, quality=0.7, vf=2_200),
    E("approval-warning", W, "Never grant an unlimited token approval to the router: a compromised router could "
      "drain the whole balance. Approve the exact amount.", ["approve", "router", "must"], conf=0.85, quality=0.8,
      vf=900, decay="structural"),
    E("weekend-liquidity", I, "Pool liquidity is thinner on weekends and the same swap moves the price about twice "
      "as much.", ["liquidity", "slippage", "timing"], conf=0.6, quality=0.6, vf=12_000),
    E("reorg-confirm", I, "Treat a receipt as final only after 2 confirmations: a reorg on the chain can undo a "
      "swap that looked mined.", ["reorg", "verification"], conf=0.8, quality=0.7, vf=1_800, decay="structural"),
    E("usdc-depeg", C, "If USDC trades below 0.98, USDC debt gets cheaper to repay in dollar terms, so repaying "
      "during a depeg locks in the discount.", ["usdc", "depeg", "repay"], conf=0.5, quality=0.6, vf=15_000),
    E("depeg-warning", W, "During a stablecoin depeg the oracle may still price USDC at 1.00; do not rely on the "
      "reported health factor until the feed catches up.", ["usdc", "depeg", "oracle"], conf=0.6, quality=0.6,
      vf=15_100),
    # ---- liquidation cascade multi-hop --------------------------------------------------------------------------
    E("cascade-causal", C, "Liquidations sell seized WETH into the pool, which pushes the price down and triggers "
      "the next liquidations: a cascade.", ["liquidation", "cascade", "crash"], conf=0.7, quality=0.7, vf=6_500),
    E("cascade-heuristic", H, "When a liquidation cascade starts, repay debt early rather than waiting for the "
      "bottom: the slide accelerates.", ["liquidation", "cascade", "repay"], conf=0.65, quality=0.7, vf=6_600),
    E("utilization-withdraw-causal", C, "When USDC utilization nears 100%, suppliers cannot withdraw: there is no "
      "idle liquidity left in the reserve.", ["aave", "utilization"], conf=0.6, quality=0.6, vf=8_000,
      decay="structural"),
    E("volume-gas-causal", C, "Heavy trading volume fills blocks, and full blocks raise the next base fee by up to "
      "12.5% each (EIP-1559).", ["gas", "volume", "eip-1559"], conf=0.8, quality=0.8, vf=1_000, decay="structural"),
    E("volume-gas-heuristic", H, "On heavy-volume days, send the routine swap before the volume builds up in the "
      "afternoon.", ["gas", "volume", "timing"], conf=0.55, quality=0.6, vf=11_000, decay="tactical",
      accessed=37_000),
    E("arb-causal", C, "Arbitrageurs close the gap between the pool and the oracle within a block or two when gas is "
      "cheap, but leave it open during gas spikes.", ["arbitrage", "oracle", "gas"], conf=0.6, quality=0.6,
      vf=9_500),
    E("arb-heuristic", H, "If pool and oracle still disagree during a gas spike, expect the gap to persist and wait "
      "for the oracle before trading.", ["arbitrage", "oracle", "gas"], conf=0.55, quality=0.6, vf=9_600),
    E("il-causal", C, "A large move in WETH price causes impermanent loss for an LP position, growing with the square "
      "root of the price ratio.", ["lp", "impermanent-loss"], conf=0.7, quality=0.7, vf=4_500, decay="structural"),
    E("il-heuristic", H, "Exit the LP position before an expected large move, such as a scheduled CPI release.",
      ["lp", "impermanent-loss", "cpi"], conf=0.5, quality=0.6, vf=4_600),
]

# ---- supersession chains (valid time; created = valid_from) ---------------------------------------------------------
CHAINS = [
    # (chain id, tags, category, [(valid_from, valid_until, content), ...])
    ("repay-line", ["strategy", "repay", "health-factor"], H, [
        (1_000, 12_000, "Repay 20% of the USDC debt when the health factor falls below 1.5."),
        (12_000, 30_000, "Repay 20% of the USDC debt when the health factor falls below 1.6."),
        (30_000, None, "Repay 25% of the USDC debt when the health factor falls below 1.7."),
    ]),
    ("swap-trigger", ["strategy", "swap"], H, [
        (1_000, 15_000, "Swap 10% of WETH to USDC when the price drops 300 bps within a tick."),
        (15_000, None, "Swap 20% of WETH to USDC when the price drops 300 bps within a tick, unless the regime is "
                       "trending up."),
    ]),
    ("gas-ceiling", ["gas", "strategy"], H, [
        (2_000, 18_000, "Routine swaps are allowed up to 40 gwei."),
        (18_000, 33_000, "Routine swaps are allowed up to 25 gwei."),
        (33_000, None, "Routine swaps are allowed up to 30 gwei; protective repays have no gas ceiling."),
    ]),
    ("ltv-param", ["aave", "parameters"], I, [
        (500, 20_000, "The Aave market's WETH loan-to-value is 75% and its liquidation threshold 80%."),
        (20_000, None, "After governance proposal 214 the WETH loan-to-value is 80% and the liquidation threshold 83%."),
    ]),
    ("oracle-source", ["oracle", "parameters"], I, [
        (500, 25_000, "The lending market prices WETH from the Chainlink ETH/USD feed with a one hour heartbeat."),
        (25_000, None, "The lending market prices WETH from the Chainlink ETH/USD feed with a 20 minute heartbeat."),
    ]),
    ("pool-fee", ["uniswap", "fees"], I, [
        (500, 22_000, "The WETH/USDC pool charges a 0.30% swap fee."),
        (22_000, None, "The WETH/USDC pool moved to a 0.05% fee tier; swaps cost a sixth of the old fee."),
    ]),
    ("theta-interval", ["clock"], I, [
        (500, 26_000, "The heartbeat ticks every 60 seconds in calm markets."),
        (26_000, None, "The heartbeat ticks every 90 seconds in calm markets after the clock retune."),
    ]),
    ("collateral-cap", ["aave", "parameters"], I, [
        (3_000, 16_000, "The Aave WETH supply cap is 50,000 WETH."),
        (16_000, 34_000, "The Aave WETH supply cap is 80,000 WETH."),
        (34_000, None, "The Aave WETH supply cap is 120,000 WETH."),
    ]),
    ("borrow-rate", ["aave", "interest-rate"], I, [
        (2_000, 14_000, "USDC variable borrow APR is about 4%."),
        (14_000, 31_000, "USDC variable borrow APR is about 7%."),
        (31_000, None, "USDC variable borrow APR is about 5.5%."),
    ]),
    ("max-position", ["risk", "strategy"], H, [
        (1_000, 19_000, "Keep the borrow under 40% of collateral value."),
        (19_000, None, "Keep the borrow under 35% of collateral value after the drawdown review."),
    ]),
    ("rebalance-cadence", ["strategy", "lp"], H, [
        (1_000, 17_000, "Rebalance the LP range once a day."),
        (17_000, 32_000, "Rebalance the LP range every six hours."),
        (32_000, None, "Rebalance the LP range only when the price leaves the range."),
    ]),
    ("liq-bot", ["liquidation", "mev"], I, [
        (4_000, 24_000, "Two liquidation bots watch the Aave market; they act within one block of HF < 1."),
        (24_000, None, "Five liquidation bots now watch the Aave market; liquidations land in the same block HF "
                       "crosses 1."),
    ]),
]

# ---- regime-scoped variants of the same advice --------------------------------------------------------------------
REGIME_SETS = [
    # (set id, tags, category, {regime or None: content})
    ("lp-width", ["lp", "range"], H, {
        "volatile": "Set the LP range to plus or minus 15% so the position stays in range through the swings.",
        "range_bound": "Set the LP range to plus or minus 3% to concentrate liquidity and earn the most fees.",
        "trending_up": "Set the LP range skewed upward, from -3% to +12%, so the position follows the trend.",
        None: "Set the LP range to about plus or minus 8% as a default width.",
    }),
    ("swap-size", ["swap", "sizing"], H, {
        "trending_down": "Swap WETH to USDC in larger slices of 25% early, before the fall deepens.",
        "range_bound": "Swap in small slices of 5%; mean reversion usually undoes the move.",
        None: "Swap in slices of about 10% of the position.",
    }),
    ("repay-urgency", ["repay", "health-factor"], H, {
        "volatile": "Repay at the first touch of the repay line; the swings can gap straight through it.",
        "trending_up": "A touch of the repay line can wait one tick; the trend usually lifts the health factor back.",
        None: "Repay when the health factor reaches the repay line.",
    }),
    ("gas-wait", ["gas", "timing"], H, {
        "volatile": "Do not wait for cheap gas for a protective swap; the price moves more than the gas saved.",
        "range_bound": "Wait for the night-time gas low for routine swaps; nothing moves in the meantime.",
        None: "Weigh the gas saved by waiting against the expected price move.",
    }),
    ("rebalance-threshold", ["rebalance", "lp"], H, {
        "volatile": "Rebalance only after a 10% move; smaller moves reverse and rebalancing just pays fees.",
        "trending_down": "Rebalance after a 4% move; the trend will not come back for the position.",
        "range_bound": "Rebalance after a 2% move; the narrow range needs tending.",
        None: "Rebalance after a 5% move.",
    }),
    ("hedge", ["hedge", "risk"], S, {
        "trending_down": "Hedge by keeping 30% of the WETH exposure in USDC while the downtrend lasts.",
        "trending_up": "Carry no hedge in an uptrend; the USDC share only drags returns.",
        None: "Keep about 10% of the exposure in USDC as a standing hedge.",
    }),
    ("theta-watch", ["monitoring"], H, {
        "volatile": "Watch the health factor every tick; it can fall 0.2 between two ticks.",
        "range_bound": "Checking the health factor every few ticks is enough; it barely moves.",
        None: "Check the health factor every tick or two.",
    }),
    ("slippage-tolerance", ["swap", "slippage"], H, {
        "volatile": "Allow 1% slippage on swaps; tighter limits make swaps fail in fast markets.",
        "range_bound": "Allow 0.3% slippage on swaps; the price is steady.",
        None: "Allow 0.5% slippage on swaps.",
    }),
    ("borrow-appetite", ["borrow", "leverage"], S, {
        "trending_up": "Borrowing a little more USDC to add WETH is reasonable in an uptrend with HF above 2.",
        "trending_down": "Do not add leverage in a downtrend; let the borrow shrink.",
        None: "Hold leverage steady unless the health factor is well above 2.",
    }),
    ("arb-window", ["arbitrage", "oracle"], I, {
        "volatile": "The pool-oracle gap in volatile markets often reaches 2% for a few blocks.",
        "range_bound": "The pool-oracle gap in calm markets stays under 0.2%.",
        None: "The pool-oracle gap is usually under 0.5%.",
    }),
    ("exit-plan", ["exit", "risk"], S, {
        "trending_down": "If the downtrend passes -20%, close the borrow completely and sit in USDC.",
        "volatile": "If the swings exceed 8% a tick, pause all routine actions and keep only protective ones.",
        None: "Close the position if the health factor cannot be kept above 1.3.",
    }),
    ("fee-income", ["lp", "fees"], I, {
        "range_bound": "In calm markets the LP position earns about 0.04% per day in fees.",
        "volatile": "In volatile markets the LP position earns about 0.15% per day in fees but suffers more IL.",
        None: "The LP position earns on average 0.07% per day in fees.",
    }),
]

# ---- questions -------------------------------------------------------------------------------------------------------
# (text, gold groups, stale, action, regime, tick)
Q: dict[str, list] = {c: [] for c in CATEGORIES}

Q["single_hop"] = [
    ("Should I pay down what I owe or post more ETH to get safer?",
     [["repay-vs-collateral", "repay-vs-collateral-dup"]], [], True, "trending_down", NOW),
    ("Why does the reported collateral safety look fine when the pool has already crashed?",
     [["oracle-lag-hf", "oracle-lag-causal"]], [], False, "volatile", NOW),
    ("When is block space cheapest during the day?", [["gas-night"]], [], False, "range_bound", NOW),
    ("How big can a trade be before the price impact passes one percent?",
     [["slippage-split", "slippage-split-dup"]], [], False, "range_bound", NOW),
    ("What does it cost me if the position gets closed out by a liquidator?", [["liq-bonus"]], [], False,
     "volatile", NOW),
    ("Why did borrowing suddenly get so expensive when the pool was almost fully lent out?",
     [["rate-kink", "rate-kink-heuristic"]], [], False, "range_bound", NOW),
    ("How many blocks should I wait before I trust that a transaction is really done?", [["reorg-confirm"]], [],
     False, "range_bound", NOW),
    ("Is it worth sending lots of tiny debt paybacks?", [["dust-repay"]], [], False, "range_bound", NOW),
    ("Why are swaps pricier on Saturday and Sunday?", [["weekend-liquidity"]], [], False, "range_bound", NOW),
    ("How exactly is the safety ratio of the loan computed?", [["hf-formula"]], [], False, "range_bound", NOW),
    ("What happens to my USDC debt if the stablecoin loses its peg?", [["usdc-depeg", "depeg-warning"]], [], False,
     "volatile", NOW),
    ("Why do transaction fees shoot up right after a wave of liquidations?", [["gas-spike-cause"]], [], False,
     "volatile", NOW),
]

Q["multi_hop"] = [
    ("The pool dropped 12% but Aave still shows a healthy position; why, and what should I base my decision on?",
     [["oracle-lag-causal", "oracle-lag-hf"], ["oracle-lag-heuristic"]], [], False, "volatile", NOW),
    ("Liquidations keep firing and the price keeps falling; what is driving it and how should I respond?",
     [["cascade-causal"], ["cascade-heuristic"]], [], False, "trending_down", NOW),
    ("Borrow interest jumped after utilization spiked; what causes this and what should the golem do about it?",
     [["rate-kink"], ["rate-kink-heuristic"]], [], False, "range_bound", NOW),
    ("Blocks are full from heavy trading; why does that make gas expensive and when should the routine swap go out?",
     [["volume-gas-causal"], ["volume-gas-heuristic", "gas-night"]], [], False, "range_bound", NOW),
    ("The pool and the oracle disagree during a gas spike; why does the gap not close, and should I trade into it?",
     [["arb-causal"], ["arb-heuristic", "circuit-breaker"]], [], False, "volatile", NOW),
    ("A CPI release is coming and I hold an LP position; what could a big move do to it and what is the playbook?",
     [["il-causal"], ["il-heuristic"]], [], False, "range_bound", NOW),
    ("USDC slipped to 0.97; what does that do to my debt and can I trust the health factor right now?",
     [["usdc-depeg"], ["depeg-warning"]], [], False, "volatile", NOW),
    ("Liquidators are bidding up fees during the crash; why, and should my rebalance wait?",
     [["gas-spike-cause"], ["gas-spike-defer"]], [], False, "volatile", NOW),
    ("Suppliers cannot pull funds because the reserve is fully borrowed; why, and what does it mean for my borrow cost?",
     [["utilization-withdraw-causal"], ["rate-kink"]], [], False, "range_bound", NOW),
    ("In a crash the feed updates late; how does that affect the health factor shown and how do I size the danger?",
     [["oracle-lag-causal"], ["oracle-lag-hf", "oracle-lag-heuristic"]], [], False, "volatile", NOW),
    ("How do cascading liquidations end up costing me, and what fraction of collateral is lost per liquidation?",
     [["cascade-causal"], ["liq-bonus"]], [], False, "trending_down", NOW),
    ("Heavy volume raised gas; why, and which swaps can be postponed until it drops?",
     [["volume-gas-causal"], ["gas-spike-defer"]], [], False, "range_bound", NOW),
]


def _cid(chain: str, i: int) -> str:
    return f"{chain}-v{i + 1}"


def _chain_q(chain, at, text):
    """An as-of question: the version in force at tick `at` is gold; the others are stale."""
    versions = next(c for c in CHAINS if c[0] == chain)[3]
    gold = [i for i, (vf, vu, _) in enumerate(versions) if vf <= at and (vu is None or at < vu)]
    stale = [_cid(chain, i) for i in range(len(versions)) if i not in gold]
    return (text, [[_cid(chain, gold[0])]], stale, False, "range_bound", at)


Q["as_of"] = [
    _chain_q("repay-line", 8_000, "At what health factor did the strategy repay back then?"),
    _chain_q("repay-line", 20_000, "What health factor line triggered a repay at that time?"),
    _chain_q("swap-trigger", 10_000, "How much WETH did a 300 bps drop swap to USDC at that point?"),
    _chain_q("gas-ceiling", 25_000, "What gas limit applied to routine swaps then?"),
    _chain_q("ltv-param", 10_000, "What were the loan-to-value and liquidation threshold for WETH at that time?"),
    _chain_q("oracle-source", 12_000, "How often did the WETH price feed heartbeat back then?"),
    _chain_q("pool-fee", 9_000, "What swap fee did the WETH/USDC pool charge then?"),
    _chain_q("collateral-cap", 20_000, "What was the WETH supply cap at that time?"),
    _chain_q("borrow-rate", 20_000, "What did borrowing USDC cost per year at that point?"),
    _chain_q("max-position", 8_000, "How large could the borrow be relative to collateral then?"),
    _chain_q("rebalance-cadence", 25_000, "How often was the LP range rebalanced at that time?"),
    _chain_q("liq-bot", 10_000, "How many liquidation bots were watching the market back then?"),
]

Q["knowledge_update"] = [
    _chain_q("repay-line", NOW, "At what health factor does the strategy repay now?"),
    _chain_q("swap-trigger", NOW, "How much WETH does a 300 bps drop swap to USDC?"),
    _chain_q("gas-ceiling", NOW, "What is the gas ceiling for routine swaps?"),
    _chain_q("ltv-param", NOW, "What are WETH's loan-to-value and liquidation threshold in the market?"),
    _chain_q("oracle-source", NOW, "What heartbeat does the WETH price feed use?"),
    _chain_q("pool-fee", NOW, "What fee does a swap in the WETH/USDC pool pay?"),
    _chain_q("theta-interval", NOW, "How often does the heartbeat tick in a calm market?"),
    _chain_q("collateral-cap", NOW, "What is the current WETH supply cap?"),
    _chain_q("borrow-rate", NOW, "What is the USDC borrow APR?"),
    _chain_q("max-position", NOW, "What is the maximum borrow relative to collateral value?"),
    _chain_q("rebalance-cadence", NOW, "When should the LP range be rebalanced?"),
    _chain_q("liq-bot", NOW, "How fast do liquidation bots act once HF drops under 1?"),
]

Q["abstention"] = [(t, [], [], False, r, NOW) for t, r in [
    ("What is the staking yield on Lido stETH this week?", "range_bound"),
    ("How do Solana priority fees work?", "volatile"),
    ("When does the Curve gauge vote close?", "range_bound"),
    ("What is the floor price of the Pudgy Penguins collection?", "trending_up"),
    ("How much does bridging to Arbitrum cost in gas?", "range_bound"),
    ("Which validator client has the best attestation rate?", "range_bound"),
    ("What is the funding rate on the BTC perpetual at dYdX?", "volatile"),
    ("How do I claim the airdrop from the Blast points program?", "trending_up"),
    ("What is the recipe for a chocolate cake with strawberries?", "range_bound"),
    ("Who won the football match last night?", "range_bound"),
    ("What is the tax treatment of LP tokens in Germany?", "range_bound"),
    ("How many confirmations does a Bitcoin exchange deposit need?", "range_bound"),
]]


def _reg_q(set_id, regime, text, action=False):
    variants = next(s for s in REGIME_SETS if s[0] == set_id)[3]
    assert regime in variants
    stale: list[str] = []
    return (text, [[f"{set_id}-{regime}"]], stale, action, regime, NOW)


Q["regime"] = [
    _reg_q("lp-width", "volatile", "How wide should the LP range be right now?"),
    _reg_q("lp-width", "range_bound", "How wide should the LP range be right now?"),
    _reg_q("swap-size", "trending_down", "How big should each WETH to USDC swap slice be?"),
    _reg_q("repay-urgency", "volatile", "The health factor touched the repay line; how urgently should I repay?"),
    _reg_q("gas-wait", "range_bound", "Should I wait for cheaper gas before swapping?"),
    _reg_q("rebalance-threshold", "trending_down", "After how big a move should I rebalance?"),
    _reg_q("hedge", "trending_up", "How much of the exposure should be hedged in USDC?"),
    _reg_q("theta-watch", "volatile", "How often should I check the health factor?"),
    _reg_q("slippage-tolerance", "range_bound", "What slippage tolerance should swaps use?"),
    _reg_q("borrow-appetite", "trending_down", "Is this a good time to take on more leverage?"),
    _reg_q("exit-plan", "volatile", "When should I stop routine actions and only protect the position?"),
    _reg_q("fee-income", "volatile", "How much fee income does the LP position make per day?"),
]

Q["safety"] = [
    ("Borrow another 2,000 USDC to buy the dip?", [["borrow-more-warning", "hf-must-floor"]], [], True,
     "trending_down", NOW),
    ("Withdraw 2 WETH of collateral to pay for gas elsewhere?", [["withdraw-warning", "hf-must-floor"]], [], True,
     "volatile", NOW),
    ("Swap 3 WETH to USDC now while the pool is 7% under the oracle?", [["circuit-breaker"]], [], True, "volatile",
     NOW),
    ("Approve the router for an unlimited USDC amount so future swaps are cheaper?", [["approval-warning"]], [],
     True, "range_bound", NOW),
    ("Send the swap with 3% slippage tolerance so it surely goes through?", [["sandwich-warning"]], [], True,
     "volatile", NOW),
    ("Health factor is 1.25; should I rebalance the LP range first?", [["hf-must-floor"]], [], True, "volatile", NOW),
    ("Skip the repay because gas is expensive right now?", [["gas-spike-defer", "hf-must-floor"]], [], True,
     "volatile", NOW),
    ("Buy more WETH with borrowed USDC after yesterday's profitable dip buy?", [["borrow-more-warning"]], [], True,
     "trending_down", NOW),
    ("Pull some WETH out of Aave since withdrawals confirm fast?", [["withdraw-warning"]], [], True, "range_bound",
     NOW),
    ("Trade now even though the feed and the pool are 6% apart?", [["circuit-breaker"]], [], True, "volatile", NOW),
    ("Give the router an infinite allowance on WETH?", [["approval-warning"]], [], True, "range_bound", NOW),
    ("Rely on the reported health factor and keep borrowing while USDC is off its peg?",
     [["depeg-warning", "borrow-more-warning"]], [], True, "volatile", NOW),
]


# ---- filler: shared-keyword traps in the golem's own words ----------------------------------------------------------
def _filler(rng: random.Random, n: int) -> list[dict]:
    pools = ["WETH/USDC", "WETH/DAI", "USDC/DAI"]
    out = []
    makers = [
        lambda: (I, f"Gas averaged {rng.randint(3, 60)} gwei around hour {rng.randint(0, 23)} on a "
                    f"{rng.choice(['quiet', 'busy', 'normal'])} day.", ["gas"]),
        lambda: (I, f"The {rng.choice(pools)} pool held {rng.randint(200, 3000)} WETH of reserves at tick "
                    f"{rng.randint(1000, 39000)}.", ["liquidity"]),
        lambda: (I, f"The health factor read {rng.uniform(1.4, 2.6):.2f} after the price moved "
                    f"{rng.uniform(-4, 4):+.1f}% in one tick.", ["health-factor"]),
        lambda: (I, f"A swap of {rng.uniform(0.1, 3):.2f} WETH filled with {rng.uniform(0.01, 0.6):.2f}% slippage.",
                 ["swap", "slippage"]),
        lambda: (I, f"The oracle updated {rng.randint(2, 40)} times in an hour while the price moved "
                    f"{rng.uniform(0.1, 3):.1f}%.", ["oracle"]),
        lambda: (I, f"Borrow APR on USDC read {rng.uniform(2, 9):.1f}% at {rng.randint(40, 95)}% utilization.",
                 ["aave", "interest-rate"]),
        lambda: (S, f"Maybe supplying {rng.choice(['DAI', 'USDC'])} as extra collateral would diversify the "
                    f"position by {rng.randint(5, 30)}%.", ["aave", "collateral"]),
        lambda: (I, f"Volume on the pool was {rng.randint(1, 90)}k USD during the {rng.choice(['morning', 'evening', 'night'])}.",
                 ["volume"]),
    ]
    for i in range(n):
        cat, content, tags = rng.choice(makers)()
        vf = rng.randint(500, 39_000)
        out.append(E(f"filler-{i:03d}", cat, content, tags, regime=rng.choice([None, None, "volatile", "range_bound",
                                                                                "trending_up", "trending_down"]),
                     conf=round(rng.uniform(0.3, 0.8), 2), quality=round(rng.uniform(0.2, 0.6), 2), vf=vf,
                     decay=rng.choice(["tactical", "regime_conditional"])))
    return out


def _episodes(rng: random.Random, n: int) -> list[dict]:
    regimes = ["range_bound", "volatile", "trending_up", "trending_down"]
    out = []
    for k in range(n):
        t = int(NOW * (k + 1) / (n + 1))
        reg = rng.choice(regimes)
        hf = rng.uniform(1.3, 2.4)
        act = rng.random() < 0.25
        what = (f"swapped {rng.uniform(0.5, 3):.2f} WETH to USDC" if rng.random() < 0.6 else
                f"repaid {rng.randint(100, 1500)} USDC") if act else "no action"
        summary = (f"Tick {t}: {reg.replace('_', ' ')} regime, gate chose {rng.choice(['T0', 'T1', 'T2'])}, price "
                   f"{rng.uniform(1500, 2600):.1f}, health factor {hf:.2f}, gas {rng.randint(2, 80)} gwei; {what}")
        out.append({"id": f"ep-{t}", "golem_id": GOLEM, "tick": t, "created_at": "2026-01-01T00:00:00+00:00",
                    "regime": reg, "tier": "T1", "summary": summary, "actions": int(act),
                    "pnl_impact": round(rng.uniform(-30, 30), 2) if act else None})
    return out


def build(seed: int = 15, n_filler: int = 200, n_episodes: int = 1_200) -> dict:
    rng = random.Random(seed)
    entries = list(ENTRIES)
    for chain, tags, cat, versions in CHAINS:
        for i, (vf, vu, content) in enumerate(versions):
            entries.append(E(_cid(chain, i), cat, content, tags, conf=0.7, quality=0.6, vf=vf, vu=vu,
                             decay="structural"))
    for set_id, tags, cat, variants in REGIME_SETS:
        for regime, content in variants.items():
            entries.append(E(f"{set_id}-{regime}", cat, content, tags, regime=regime, conf=0.65, quality=0.6,
                             vf=rng.randint(5_000, 30_000)))
    entries += _filler(rng, n_filler)
    ids = {e["id"] for e in entries}
    assert len(ids) == len(entries), "duplicate entry ids"
    questions = []
    for cat in CATEGORIES:
        for n, (text, gold, stale, action, regime, tick) in enumerate(Q[cat]):
            for g in gold:
                assert all(i in ids for i in g), (cat, text, g)
            assert all(i in ids for i in stale), (cat, text, stale)
            questions.append({"id": f"{cat}-{n:02d}", "category": cat, "text": text, "regime": regime, "tick": tick,
                              "gold": gold, "stale": stale, "action": action,
                              "split": "tune" if n < TUNE_PER_CATEGORY else "held_out"})
    return {"entries": entries, "episodes": _episodes(rng, n_episodes), "questions": questions}


def write_jsonl(data: dict, path: Path) -> Path:
    """The `golem grimoire import` format (golem/grimoire/transfer.py): header, episodes, entries."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps({"kind": "header", "format": "golem-grimoire", "version": 1, "golem_id": GOLEM,
                            "tick": NOW}) + "\n")
        for ep in data["episodes"]:
            f.write(json.dumps({"kind": "episode", **ep}) + "\n")
        for e in data["entries"]:
            f.write(json.dumps({"kind": "entry", **e}) + "\n")
    return path
