"""Read the chain into a ChainSnapshot in one JSON-RPC batch (heartbeat §S3 step 1: observe).

All reads go out as a single batch request (one HTTP round trip) and are decoded here, so
a failed or malformed answer can be reported by the name of the read that failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eth_abi import encode as abi_encode
from eth_utils import function_signature_to_4byte_selector, to_checksum_address
from web3 import Web3

from golem.chain.contracts import (
    HEALTH_FACTOR_DECIMALS,
    ORACLE_PRICE_DECIMALS,
    Deployment,
    decimals_of,
)
from golem.chain.tools import LP_POSITION_KIND
from golem.models.observation import ChainSnapshot, PoolState, PositionState

MAX_UINT256 = 2**256 - 1
BALANCE_TOKENS: tuple[str, ...] = ("WETH", "USDC", "DAI")


class ChainReadError(ValueError):
    """An RPC answer was missing, an error, or not what the contract ABI promises."""


@dataclass(frozen=True)
class _Read:
    name: str  # human name used in error messages, e.g. "POOL.reserve0()"
    method: str
    params: list[Any]


def _calldata(signature: str, arg_types: tuple[str, ...] = (), args: tuple[Any, ...] = ()) -> str:
    data = function_signature_to_4byte_selector(signature)
    if arg_types:
        data += abi_encode(list(arg_types), list(args))
    return "0x" + data.hex()


def _eth_call(name: str, to: str, signature: str, *address_args: str) -> _Read:
    data = _calldata(signature, ("address",) * len(address_args), address_args)
    return _Read(name, "eth_call", [{"to": to, "data": data}, "latest"])


def _plan(deployment: Deployment, account: str) -> list[_Read]:
    a = deployment.addresses
    reads = [
        _Read("eth_chainId", "eth_chainId", []),
        _Read("eth_getBlockByNumber(latest)", "eth_getBlockByNumber", ["latest", False]),
        _Read("eth_gasPrice", "eth_gasPrice", []),
        _Read(f"eth_getBalance({account})", "eth_getBalance", [account, "latest"]),
        _eth_call("POOL.reserve0()", a["POOL"], "reserve0()"),
        _eth_call("POOL.reserve1()", a["POOL"], "reserve1()"),
        _eth_call("ORACLE.price()", a["ORACLE"], "price()"),
    ]
    for sym in BALANCE_TOKENS:
        reads.append(_eth_call(f"{sym}.balanceOf({account})", a[sym], "balanceOf(address)", account))
    for fn in ("collateral_of", "debt_of", "health_factor"):
        reads.append(_eth_call(f"LENDING.{fn}({account})", a["LENDING"], f"{fn}(address)", account))
    reads.append(_eth_call(f"POOL.shares({account})", a["POOL"], "shares(address)", account))
    reads.append(_eth_call("POOL.total_shares()", a["POOL"], "total_shares()"))
    return reads


def _send(w3: Web3, reads: list[_Read]) -> list[dict[str, Any]]:
    provider = w3.provider
    requests = [(r.method, r.params) for r in reads]
    try:
        if hasattr(provider, "make_batch_request"):
            answers: Any = provider.make_batch_request(requests)  # type: ignore[attr-defined]
        else:  # providers without batching: one request each
            answers = [provider.make_request(m, p) for m, p in requests]  # type: ignore[arg-type]
    except ChainReadError:
        raise
    except Exception as exc:  # transport failures (connection refused, timeout, bad JSON)
        raise ChainReadError(f"chain read batch of {len(reads)} calls failed: {exc}") from exc
    if isinstance(answers, dict):  # a batch rejected as a whole comes back as one error object
        raise ChainReadError(f"chain read batch was rejected: {answers.get('error', answers)}")
    if not isinstance(answers, list) or len(answers) != len(reads):
        got = len(answers) if isinstance(answers, list) else type(answers).__name__
        raise ChainReadError(f"chain read batch: expected {len(reads)} answers, got {got}")
    return answers


def _result(read: _Read, answer: Any) -> Any:
    if not isinstance(answer, dict):
        raise ChainReadError(f"{read.name}: malformed RPC answer {answer!r}")
    if answer.get("error") is not None:
        err = answer["error"]
        msg = err.get("message", err) if isinstance(err, dict) else err
        raise ChainReadError(f"{read.name} failed: {msg}")
    if "result" not in answer or answer["result"] is None:
        raise ChainReadError(f"{read.name}: RPC answer has no result ({answer!r})")
    return answer["result"]


def _quantity(read: _Read, value: Any) -> int:
    if not isinstance(value, str) or not value.startswith("0x"):
        raise ChainReadError(f"{read.name}: expected a hex quantity, got {value!r}")
    try:
        return int(value, 16)
    except ValueError:
        raise ChainReadError(f"{read.name}: expected a hex quantity, got {value!r}") from None


def _uint256(read: _Read, value: Any) -> int:
    # an eth_call to an address without code answers "0x": a wrong deployment, not a zero
    if not isinstance(value, str) or not value.startswith("0x") or len(value) != 66:
        raise ChainReadError(
            f"{read.name}: expected one 32-byte uint256, got {value!r} "
            "(is the deployment for this chain, and is the contract deployed?)"
        )
    try:
        return int(value, 16)
    except ValueError:
        raise ChainReadError(f"{read.name}: not hex: {value!r}") from None


def read_snapshot(w3: Web3, deployment: Deployment, account: str) -> ChainSnapshot:
    """Chain id, block, gas price, pool, oracle, balances, the lending position of `account` and, when it
    holds pool shares, its pool position (kind "lp")."""
    if not Web3.is_address(account):
        raise ValueError(f"account must be an address, got {account!r}")
    account = to_checksum_address(account)
    reads = _plan(deployment, account)
    answers = _send(w3, reads)
    results = [_result(r, ans) for r, ans in zip(reads, answers)]
    by_name = dict(zip((r.name for r in reads), zip(reads, results)))

    def q(name: str) -> int:
        read, value = by_name[name]
        return _quantity(read, value)

    def u(name: str) -> int:
        read, value = by_name[name]
        return _uint256(read, value)

    block_read, block = by_name["eth_getBlockByNumber(latest)"]
    if not isinstance(block, dict) or "number" not in block or "timestamp" not in block:
        raise ChainReadError(f"{block_read.name}: malformed block {block!r}")
    block_number = _quantity(block_read, block["number"])
    block_timestamp = _quantity(block_read, block["timestamp"])

    weth_dec, usdc_dec = decimals_of("WETH"), decimals_of("USDC")
    reserve0 = u("POOL.reserve0()") / 10**weth_dec
    reserve1 = u("POOL.reserve1()") / 10**usdc_dec
    pool = PoolState(
        address=deployment.addresses["POOL"],
        token0="WETH",
        token1="USDC",
        reserve0=reserve0,
        reserve1=reserve1,
        price=reserve1 / reserve0 if reserve0 > 0 else 0.0,
        tvl=2 * reserve1,  # both sides are worth the same at the pool's own price
    )
    balances = {
        sym: u(f"{sym}.balanceOf({account})") / 10 ** decimals_of(sym) for sym in BALANCE_TOKENS
    }
    debt_raw = u(f"LENDING.debt_of({account})")
    hf_raw = u(f"LENDING.health_factor({account})")
    position = PositionState(
        id=f"lending:{deployment.addresses['LENDING']}",
        kind="lending",
        collateral=u(f"LENDING.collateral_of({account})") / 10**weth_dec,
        debt=debt_raw / 10**usdc_dec,
        health_factor=None if debt_raw == 0 or hf_raw == MAX_UINT256 else hf_raw / 10**HEALTH_FACTOR_DECIMALS,
    )
    positions = [position]
    shares_raw, total_raw = u(f"POOL.shares({account})"), u("POOL.total_shares()")
    if shares_raw > 0 and total_raw > 0:
        # The golem's pool position, only when it holds shares. PositionState is shaped for lending, so
        # `collateral` carries the WETH side of the pro-rata claim (shares / total × reserve0); the
        # USDC side is that × the pool price (golem.chain.tools.lp_position / lp_value_usd).
        positions.append(
            PositionState(
                id=f"lp:{deployment.addresses['POOL']}",
                kind=LP_POSITION_KIND,
                collateral=shares_raw / total_raw * reserve0,
            )
        )
    return ChainSnapshot(
        chain_id=q("eth_chainId"),
        block_number=block_number,
        block_timestamp=block_timestamp,
        gas_price_gwei=q("eth_gasPrice") / 1e9,
        pool=pool,
        oracle_price=u("ORACLE.price()") / 10**ORACLE_PRICE_DECIMALS,
        balances=balances,
        native_balance_eth=q(f"eth_getBalance({account})") / 1e18,
        positions=positions,
    )
