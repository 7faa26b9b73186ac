"""The write tools a deliberator may ask for: the tokens they know, their JSON schemas, the action type each
records, and the error a bad argument raises."""

from __future__ import annotations

from typing import Any

from golem.chain.contracts import MAIN_PAIR, TOKEN_DECIMALS


# Token symbols the tools understand; whether one may be *traded* is the PolicyCage's call.
KNOWN_TOKENS: tuple[str, ...] = tuple(TOKEN_DECIMALS)
STABLE_TOKENS: frozenset[str] = frozenset({"USDC", "DAI"})

# A swap without max_slippage_bps uses this bound (the PolicyCage still checks it).
DEFAULT_MAX_SLIPPAGE_BPS = 50.0

# The golem's Aave V3 position: WETH collateral (aWETH), USDC variable debt (variableDebtUSDC).
COLLATERAL_TOKEN = "WETH"
DEBT_TOKEN = "USDC"

# The Uniswap V2 pair the golem provides liquidity to (WETH/USDC) and its LP token.
POOL_TOKEN0 = "WETH"  # the tools' order (amount_weth, amount_usdc), not the pair's token0 (lower address)
POOL_TOKEN1 = "USDC"
LP_PAIR = MAIN_PAIR
LP_TOOLS: frozenset[str] = frozenset({"add_liquidity", "remove_liquidity"})
# The pair's LP token has 18 decimals, but its raw amounts are sqrt(WETH-wei × USDC-base-unit), so one
# human share here is 10^((18 + 6) / 2) = 10^12 raw LP units (1 WETH + 2,000 USDC ≈ 44.7 shares).
# Every delta:lp_shares, `shares` expectation and share price uses this unit.
LP_SHARE_DECIMALS = (18 + 6) // 2
# `delta:<name>` key of the golem's pool shares in simulation expectations and verification.
LP_SHARES_KEY = "lp_shares"
# ChainSnapshot position kind the reader uses for the golem's pool position (see golem.chain.reader).
LP_POSITION_KIND = "lp"


class ToolArgumentError(ValueError):
    """An action's arguments do not fit its tool; the message names the argument and the fix."""


_AMOUNT = {"type": "number", "exclusiveMinimum": 0}
_TOKEN = {"type": "string", "enum": list(KNOWN_TOKENS)}

TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "swap": {
        "name": "swap",
        "description": (
            "Swap token_in for token_out through Uniswap V2 Router02 (swapExactTokensForTokens; "
            "WETH<->USDC and WETH<->DAI on their pairs, USDC<->DAI through WETH). amount_in is in "
            "human units of token_in. The trade reverts if the output is worse than the router's "
            "quote (getAmountsOut) by more than max_slippage_bps (or below min_amount_out when given), "
            "or if it is not mined within a few minutes."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "token_in": {**_TOKEN, "description": "symbol of the token sold"},
                "token_out": {**_TOKEN, "description": "symbol of the token bought"},
                "amount_in": {**_AMOUNT, "description": "amount of token_in to sell, human units"},
                "max_slippage_bps": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 10_000,
                    "description": f"worst acceptable output vs quote, bps (default {DEFAULT_MAX_SLIPPAGE_BPS:g})",
                },
                "min_amount_out": {**_AMOUNT, "description": "optional hard floor on the output, human units"},
            },
            "required": ["token_in", "token_out", "amount_in"],
            "additionalProperties": False,
        },
    },
    "supply": {
        "name": "supply",
        "description": "Supply WETH as collateral to the Aave V3 Pool (human units of WETH); it earns aWETH.",
        "input_schema": {
            "type": "object",
            "properties": {"amount": {**_AMOUNT, "description": "WETH to supply"}},
            "required": ["amount"],
            "additionalProperties": False,
        },
    },
    "withdraw": {
        "name": "withdraw",
        "description": (
            "Withdraw WETH collateral from the Aave V3 Pool; Aave refuses if the health factor would drop "
            "below 1. An amount at (or a hair above) the supplied balance withdraws all of it."
        ),
        "input_schema": {
            "type": "object",
            "properties": {"amount": {**_AMOUNT, "description": "WETH to withdraw"}},
            "required": ["amount"],
            "additionalProperties": False,
        },
    },
    "borrow": {
        "name": "borrow",
        "description": (
            "Borrow USDC at Aave V3's variable rate against the supplied WETH; Aave refuses if the "
            "collateral cannot cover it (loan-to-value) or the health factor would drop below 1."
        ),
        "input_schema": {
            "type": "object",
            "properties": {"amount": {**_AMOUNT, "description": "USDC to borrow"}},
            "required": ["amount"],
            "additionalProperties": False,
        },
    },
    "repay": {
        "name": "repay",
        "description": (
            "Repay variable USDC debt on the Aave V3 Pool. An amount at or above the debt repays all of it, "
            "interest accrued up to inclusion included (Aave takes min(amount, debt))."
        ),
        "input_schema": {
            "type": "object",
            "properties": {"amount": {**_AMOUNT, "description": "USDC to repay"}},
            "required": ["amount"],
            "additionalProperties": False,
        },
    },
    "add_liquidity": {
        "name": "add_liquidity",
        "description": (
            "Deposit WETH and USDC into the Uniswap V2 WETH/USDC pair through Router02 (addLiquidity) for "
            "LP shares (amounts in human units). The router deposits at the pair's price ratio, so it may "
            "take less of one side; the deposit is refused when that shortfall is more than "
            "max_slippage_bps of the amount given (supply them at the pool's price), or when the pool "
            "price moves by more than that before inclusion."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "amount_weth": {**_AMOUNT, "description": "WETH to deposit, human units"},
                "amount_usdc": {**_AMOUNT, "description": "USDC to deposit, human units"},
                "max_slippage_bps": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 10_000,
                    "description": (
                        "most the router may take below either amount (ratio off the pool price), bps "
                        f"(default {DEFAULT_MAX_SLIPPAGE_BPS:g})"
                    ),
                },
            },
            "required": ["amount_weth", "amount_usdc"],
            "additionalProperties": False,
        },
    },
    "remove_liquidity": {
        "name": "remove_liquidity",
        "description": (
            "Withdraw a fraction of the golem's LP shares of the Uniswap V2 WETH/USDC pair through Router02 "
            "(removeLiquidity); returns both tokens pro rata to the pair's reserves (refused if either side "
            f"comes out more than {DEFAULT_MAX_SLIPPAGE_BPS:g} bps below the planned claim). "
            "fraction 1 removes every share."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "fraction": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "maximum": 1,
                    "description": "share of the golem's pool shares to remove, 0 < fraction <= 1 (0.5 = half)",
                },
            },
            "required": ["fraction"],
            "additionalProperties": False,
        },
    },
}


WRITE_TOOLS: frozenset[str] = frozenset(TOOL_SCHEMAS)

# ActionRecord.action_type per tool (heartbeat ActionRecord: "swap, rebalance, deposit, withdraw, ...").
ACTION_TYPES: dict[str, str] = {
    "swap": "swap",
    "supply": "deposit",
    "withdraw": "withdraw",
    "borrow": "borrow",
    "repay": "repay",
    "add_liquidity": "add_liquidity",
    "remove_liquidity": "remove_liquidity",
}
