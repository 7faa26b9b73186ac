"""Tier-1 read tools and the tool registry the deliberator (and an LLM) sees.

A read tool needs no capability: it only reads the chain. Each has a JSON schema, validates its
arguments with a message naming the bad one, and returns plain JSON. Write tools (golem.chain.tools)
are listed in the same registry for the LLM, but `ToolRegistry.read_tool` never hands one out, so
nothing that runs reads (speculation included) can reach a write.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from web3 import Web3

from web3.exceptions import ContractLogicError

from golem.chain.contracts import AAVE_BASE_DECIMALS, FEED_DECIMALS, Deployment
from golem.chain.reader import read_snapshot
from golem.chain.tools.arguments import from_base_units, to_base_units
from golem.chain.tools.calls import cached_contract
from golem.chain.tools.schemas import KNOWN_TOKENS, TOOL_SCHEMAS, ToolArgumentError
from golem.chain.tools.uniswap_swap import path_pairs, swap_path

ReadFn = Callable[[Web3, Deployment, str, dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class ReadTool:
    name: str
    description: str
    input_schema: dict[str, Any]
    run: ReadFn

    def schema(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}

    def __call__(self, w3: Web3, deployment: Deployment, account: str,
                 arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        args = dict(arguments or {})
        props = self.input_schema.get("properties", {})
        extra = sorted(set(args) - set(props))
        if extra:
            raise ToolArgumentError(f"{self.name}: unexpected argument(s) {', '.join(extra)}; allowed: "
                                    f"{', '.join(sorted(props)) or 'none'}")
        missing = [k for k in self.input_schema.get("required", []) if args.get(k) is None]
        if missing:
            raise ToolArgumentError(f"{self.name}: missing required argument(s) {', '.join(missing)}")
        return self.run(w3, deployment, account, args)


_NO_ARGS = {"type": "object", "properties": {}, "additionalProperties": False}


def _balances(w3: Web3, deployment: Deployment, account: str, _args: dict[str, Any]) -> dict[str, Any]:
    snap = read_snapshot(w3, deployment, account)
    return {"block": snap.block_number, "balances": snap.balances, "native_eth": snap.native_balance_eth}


def _pool(w3: Web3, deployment: Deployment, account: str, _args: dict[str, Any]) -> dict[str, Any]:
    snap = read_snapshot(w3, deployment, account)
    return {"block": snap.block_number, **snap.pool.model_dump()}


def _position(w3: Web3, deployment: Deployment, account: str, _args: dict[str, Any]) -> dict[str, Any]:
    snap = read_snapshot(w3, deployment, account)
    return {"block": snap.block_number, "positions": [p.model_dump() for p in snap.positions]}


def _gas(w3: Web3, _deployment: Deployment, _account: str, _args: dict[str, Any]) -> dict[str, Any]:
    return {"gas_price_gwei": w3.eth.gas_price / 1e9}


def _oracle(w3: Web3, deployment: Deployment, _account: str, _args: dict[str, Any]) -> dict[str, Any]:
    """The WETH feed's latest round (answer, round id, age against the latest block) and what Aave's
    oracle answers for WETH (the price Aave values the golem's collateral at)."""
    feed = cached_contract(w3, deployment, "FEED_WETH").functions
    rid, answer, _started, updated_at, _answered = feed.latestRoundData().call()
    aave = cached_contract(w3, deployment, "AAVE_ORACLE").functions.getAssetPrice(deployment.address("WETH")).call()
    now = w3.eth.get_block("latest")["timestamp"]
    return {
        "price": answer / 10**FEED_DECIMALS,
        "round_id": rid,
        "updated_at": updated_at,
        "age_s": max(0, now - updated_at),
        "heartbeat_s": deployment.heartbeat_s("WETH"),
        "aave_oracle_price": aave / 10**AAVE_BASE_DECIMALS,
    }


def _block(w3: Web3, _deployment: Deployment, _account: str, _args: dict[str, Any]) -> dict[str, Any]:
    blk = w3.eth.get_block("latest")
    return {"number": blk["number"], "timestamp": blk["timestamp"], "hash": "0x" + bytes(blk["hash"]).hex()}


def _symbol(name: str, raw: Any) -> str:
    sym = str(raw).strip().upper()
    if sym not in KNOWN_TOKENS:
        raise ToolArgumentError(f"quote_swap.{name}: unknown token {raw!r}; use one of {', '.join(KNOWN_TOKENS)}")
    return sym


def _quote(w3: Web3, deployment: Deployment, _account: str, args: dict[str, Any]) -> dict[str, Any]:
    tin = _symbol("token_in", args["token_in"])
    tout = _symbol("token_out", args.get("token_out") or ("USDC" if tin == "WETH" else "WETH"))
    if tin == tout:
        raise ToolArgumentError(f"quote_swap.token_out: must differ from token_in (both {tin})")
    try:
        amount = Decimal(str(args["amount_in"]))
    except Exception:
        raise ToolArgumentError(f"quote_swap.amount_in: {args['amount_in']!r} is not a number") from None
    if not amount.is_finite() or amount <= 0:
        raise ToolArgumentError(f"quote_swap.amount_in: must be > 0, got {args['amount_in']!r}")
    path = swap_path(tin, tout)
    missing = [k for k in path_pairs(path) if not deployment.has(k)]
    if missing:
        raise ToolArgumentError(f"quote_swap: the address book has no {', '.join(missing)} for {' -> '.join(path)}")
    router = cached_contract(w3, deployment, "UNI_ROUTER")
    try:
        amounts = router.functions.getAmountsOut(to_base_units(amount, tin), [deployment.address(s) for s in path]).call()
    except ContractLogicError as e:
        raise ToolArgumentError(f"quote_swap: Router02.getAmountsOut refused: {e.message}") from None
    out = from_base_units(amounts[-1], tout)
    return {"token_in": tin, "token_out": tout, "amount_in": float(amount), "amount_out": out, "path": path}


READ_TOOLS: dict[str, ReadTool] = {
    t.name: t
    for t in (
        ReadTool("get_balances", "Wallet balances of WETH, USDC, DAI and native ETH.", _NO_ARGS, _balances),
        ReadTool("get_pool_state", "Reserves, price and TVL of the Uniswap V2 WETH/USDC pair.", _NO_ARGS, _pool),
        ReadTool("get_position", "The Aave V3 position (collateral, debt, health factor as Aave computes it) "
                 "and the LP position in the WETH/USDC pair.", _NO_ARGS, _position),
        ReadTool("get_gas_price", "The node's current gas price in gwei.", _NO_ARGS, _gas),
        ReadTool("get_oracle_price", "The Chainlink-style ETH/USD feed's latest round (price, round id, age, "
                 "heartbeat) and Aave's oracle price for WETH.", _NO_ARGS, _oracle),
        ReadTool("get_block", "The latest block's number, timestamp and hash.", _NO_ARGS, _block),
        ReadTool(
            "quote_swap",
            "Uniswap V2 Router02's quote (getAmountsOut, 0.3 % fee per hop included) for selling amount_in of "
            "token_in for token_out (default: USDC for WETH, else WETH); USDC<->DAI routes through WETH.",
            {
                "type": "object",
                "properties": {
                    "token_in": {"type": "string", "enum": list(KNOWN_TOKENS)},
                    "amount_in": {"type": "number", "exclusiveMinimum": 0},
                    "token_out": {"type": "string", "enum": list(KNOWN_TOKENS)},
                },
                "required": ["token_in", "amount_in"],
                "additionalProperties": False,
            },
            _quote,
        ),
    )
}


class ToolRegistry:
    """Read tools (tier 1) and write tools (tier 2, need a permit) in one listing."""

    def __init__(self, read_tools: dict[str, ReadTool] | None = None) -> None:
        self._read = dict(read_tools or READ_TOOLS)
        overlap = set(self._read) & set(TOOL_SCHEMAS)
        if overlap:
            raise ValueError(f"tool names used as both read and write: {sorted(overlap)}")

    def read_tools(self) -> list[ReadTool]:
        return list(self._read.values())

    def read_tool(self, name: str) -> ReadTool | None:
        """A read tool, or None — for a write tool too ."""
        return self._read.get(name)

    def is_write(self, name: str) -> bool:
        return name in TOOL_SCHEMAS

    def schemas(self, *, forbidden: list[str] | tuple[str, ...] = ()) -> list[dict[str, Any]]:
        """What the LLM sees: every read tool, then the write tools not forbidden (MUST NOT lines)."""
        reads = [t.schema() for t in self._read.values()]
        writes = [{**s, "tier": "write"} for n, s in TOOL_SCHEMAS.items() if n not in set(forbidden)]
        return [{**r, "tier": "read"} for r in reads] + writes
