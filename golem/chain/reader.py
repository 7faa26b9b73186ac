"""Read the chain into a ChainSnapshot in one JSON-RPC batch (the observe step).

The head's number is read first; every read of the batch then names that block, so a block mined while the batch
is answered cannot split the snapshot between two states. Answers are decoded here, so a failed or malformed answer
is reported by the name of the read that failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eth_abi import decode as abi_decode
from eth_abi import encode as abi_encode
from eth_utils import function_signature_to_4byte_selector, keccak, to_checksum_address
from web3 import Web3

from golem.chain.contracts import (
    AAVE_BASE_DECIMALS,
    FEED_DECIMALS,
    HEALTH_FACTOR_DECIMALS,
    MAIN_PAIR,
    PAIRS,
    TOKEN_DECIMALS,
    TOKEN_SYMBOLS,
    Deployment,
    decimals_of,
)
from golem.chain.tools.schemas import LP_POSITION_KIND
from golem.models.observation import ChainSnapshot, FeedState, LiquidationEvent, PoolState, PositionState

MAX_UINT256 = 2**256 - 1
BALANCE_TOKENS: tuple[str, ...] = ("WETH", "USDC", "DAI")


class ChainReadError(ValueError):
    """An RPC answer was missing, an error, or not what the contract ABI promises."""

    MAX_CHARS = 400  # the message quotes the bad answer; a node can answer megabytes

    def __init__(self, message: str) -> None:
        if len(message) > self.MAX_CHARS:
            message = f"{message[: self.MAX_CHARS - 60]}… ({len(message):,} chars, cut)"
        super().__init__(message)


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


def _eth_call(name: str, to: str, signature: str, *address_args: str, block: str = "latest") -> _Read:
    data = _calldata(signature, ("address",) * len(address_args), address_args)
    return _Read(name, "eth_call", [{"to": to, "data": data}, block])


BLOCK_READ = "eth_getBlockByNumber"


def _plan(deployment: Deployment, account: str, block: str = "latest") -> list[_Read]:
    """Every read at `block` (a hex number, or "latest")."""
    a = deployment.addresses
    reads = [
        _Read("eth_chainId", "eth_chainId", []),
        _Read(BLOCK_READ, "eth_getBlockByNumber", [block, False]),
        _Read("eth_gasPrice", "eth_gasPrice", []),
        _Read(f"eth_getBalance({account})", "eth_getBalance", [account, block]),
        _eth_call("PAIR.getReserves()", a[MAIN_PAIR], "getReserves()", block=block),
        _eth_call("AAVE_POOL.getUserAccountData", a["AAVE_POOL"], "getUserAccountData(address)", account, block=block),
        _eth_call(f"A_WETH.balanceOf({account})", a["A_WETH"], "balanceOf(address)", account, block=block),
        _eth_call(f"VDEBT_USDC.balanceOf({account})", a["VDEBT_USDC"], "balanceOf(address)", account, block=block),
        _eth_call(f"PAIR.balanceOf({account})", a[MAIN_PAIR], "balanceOf(address)", account, block=block),
        _eth_call("PAIR.totalSupply()", a[MAIN_PAIR], "totalSupply()", block=block),
    ]
    for sym in BALANCE_TOKENS:
        reads.append(_eth_call(f"{sym}.balanceOf({account})", a[sym], "balanceOf(address)", account, block=block))
    for sym in feed_symbols(deployment):
        reads.append(_eth_call(f"FEED_{sym}.latestRoundData()", a[f"FEED_{sym}"], "latestRoundData()", block=block))
    return reads


def head_number(w3: Web3) -> int:
    """The chain head's number (its own request: the batch that follows reads at it)."""
    read = _Read("eth_blockNumber", "eth_blockNumber", [])
    return _quantity(read, _result(read, _send(w3, [read])[0]))


def feed_symbols(deployment: Deployment) -> list[str]:
    """The assets whose feeds the book names (WETH always; the stables where the market has them)."""
    return [sym for sym in TOKEN_SYMBOLS if deployment.has(f"FEED_{sym}")]


def pair_token0(deployment: Deployment, pair_key: str = MAIN_PAIR) -> str:
    """The symbol Uniswap V2 made token0 of a pair: the lower of the two token addresses."""
    t_a, t_b = PAIRS[pair_key]
    return min((t_a, t_b), key=lambda s: int(deployment.addresses[s], 16))


def _send(w3: Web3, reads: list[_Read]) -> list[dict[str, Any]]:
    provider = w3.provider
    requests = [(r.method, r.params) for r in reads]
    try:
        if hasattr(provider, "make_batch_request"):
            answers: Any = provider.make_batch_request(requests)
        else:  # providers without batching: one request each
            answers = [provider.make_request(m, p) for m, p in requests]  # type: ignore[arg-type]
    except ChainReadError:
        raise
    except Exception as exc:  # transport failures (connection refused, timeout, bad JSON)
        what = reads[0].name if len(reads) == 1 else f"batch of {len(reads)} calls"
        raise ChainReadError(f"chain read {what} failed: {exc}") from exc
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
        n = int(value, 16)
    except ValueError:
        raise ChainReadError(f"{read.name}: expected a hex quantity, got {value!r}") from None
    if n >= 1 << 256:  # no JSON-RPC quantity is wider than a uint256 (and a float could not hold it)
        raise ChainReadError(f"{read.name}: quantity {value[:24]}… is wider than 256 bits")
    return n


def _words(read: _Read, value: Any, n: int) -> list[int]:
    """An eth_call answer of at least `n` 32-byte words (a tuple return such as getReserves())."""
    if not isinstance(value, str) or not value.startswith("0x") or len(value) < 2 + 64 * n:
        raise ChainReadError(
            f"{read.name}: expected {n} 32-byte words, got {str(value)[:80]!r} "
            "(is the address book for this chain, and is the contract deployed?)"
        )
    try:
        return [int(value[2 + 64 * i : 2 + 64 * (i + 1)], 16) for i in range(n)]
    except ValueError:
        raise ChainReadError(f"{read.name}: not hex: {value[:80]!r}") from None


def _int256(word: int) -> int:
    return word - 2**256 if word >= 2**255 else word


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
    """Chain id, block, gas price, the Uniswap V2 pair, the feeds, balances, the Aave V3 position of `account`
    (health factor as Aave computes it) and, when it holds LP tokens, its pair position (kind "lp")."""
    if not Web3.is_address(account):
        raise ValueError(f"account must be an address, got {account!r}")
    account = to_checksum_address(account)
    reads = _plan(deployment, account, hex(head_number(w3)))
    answers = _send(w3, reads)
    results = [_result(r, ans) for r, ans in zip(reads, answers)]
    by_name = dict(zip((r.name for r in reads), zip(reads, results)))

    def q(name: str) -> int:
        read, value = by_name[name]
        return _quantity(read, value)

    def u(name: str) -> int:
        read, value = by_name[name]
        return _uint256(read, value)

    def words(name: str, n: int) -> list[int]:
        read, value = by_name[name]
        return _words(read, value, n)

    block_read, block = by_name[BLOCK_READ]
    if not isinstance(block, dict) or "number" not in block or "timestamp" not in block:
        raise ChainReadError(f"{block_read.name}: malformed block {block!r}")
    block_number = _quantity(block_read, block["number"])
    block_timestamp = _quantity(block_read, block["timestamp"])

    weth_dec, usdc_dec = decimals_of("WETH"), decimals_of("USDC")
    raw0, raw1, _ts = words("PAIR.getReserves()", 3)
    weth_raw, usdc_raw = (raw0, raw1) if pair_token0(deployment) == "WETH" else (raw1, raw0)
    reserve0, reserve1 = weth_raw / 10**weth_dec, usdc_raw / 10**usdc_dec
    pool = PoolState(
        address=deployment.addresses[MAIN_PAIR],
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
    coll_base, debt_base, _avail, lt_bps, ltv_bps, hf_raw = words("AAVE_POOL.getUserAccountData", 6)
    debt_raw = u(f"VDEBT_USDC.balanceOf({account})")
    position = PositionState(
        id=f"lending:{deployment.addresses['AAVE_POOL']}",
        kind="lending",
        collateral=u(f"A_WETH.balanceOf({account})") / 10**weth_dec,
        debt=debt_raw / 10**usdc_dec,
        # Aave answers type(uint256).max with no debt: infinite health, recorded as None
        health_factor=None if debt_base == 0 or hf_raw == MAX_UINT256 else hf_raw / 10**HEALTH_FACTOR_DECIMALS,
        collateral_usd=coll_base / 10**AAVE_BASE_DECIMALS,
        debt_usd=debt_base / 10**AAVE_BASE_DECIMALS,
        liquidation_threshold=lt_bps / 10_000,
        ltv=ltv_bps / 10_000,
    )
    positions = [position]
    shares_raw, total_raw = u(f"PAIR.balanceOf({account})"), u("PAIR.totalSupply()")
    if shares_raw > 0 and total_raw > 0:
        # The golem's pair position, only when it holds LP tokens. PositionState is shaped for lending, so
        # `collateral` carries the WETH side of the pro-rata claim (shares / total × WETH reserve); the
        # USDC side is that × the pool price (golem.chain.tools.valuation.lp_position / lp_value_usd).
        positions.append(
            PositionState(
                id=f"lp:{deployment.addresses[MAIN_PAIR]}",
                kind=LP_POSITION_KIND,
                collateral=shares_raw / total_raw * reserve0,
            )
        )
    feeds = []
    for sym in feed_symbols(deployment):
        name = f"FEED_{sym}.latestRoundData()"
        round_id, answer, _started, updated_at, _answered = words(name, 5)
        answer = _int256(answer)
        if answer <= 0:
            raise ChainReadError(f"{name}: answer {answer} is not a positive price")
        feeds.append(FeedState(
            symbol=sym, address=deployment.addresses[f"FEED_{sym}"], answer=answer / 10**FEED_DECIMALS,
            round_id=round_id, updated_at=updated_at, age_s=max(0, block_timestamp - updated_at),
            heartbeat_s=deployment.heartbeat_s(sym),
        ))  # fmt: skip
    weth_feed = next(f for f in feeds if f.symbol == "WETH")
    return ChainSnapshot(
        chain_id=q("eth_chainId"),
        block_number=block_number,
        block_timestamp=block_timestamp,
        gas_price_gwei=q("eth_gasPrice") / 1e9,
        pool=pool,
        oracle_price=weth_feed.answer,
        balances=balances,
        native_balance_eth=q(f"eth_getBalance({account})") / 1e18,
        positions=positions,
        feeds=feeds,
    )


LIQUIDATION_CALL_TOPIC = "0x" + keccak(
    text="LiquidationCall(address,address,address,uint256,uint256,address,bool)"
).hex()


def read_liquidations(w3: Web3, deployment: Deployment, account: str, from_block: int, to_block: int) -> list[LiquidationEvent]:
    """Aave `LiquidationCall` logs against `account` in [from_block, to_block], oldest first."""
    if to_block < from_block:
        return []
    account = to_checksum_address(account)
    user_topic = "0x" + "00" * 12 + account[2:].lower()
    try:
        logs = w3.eth.get_logs({
            "address": Web3.to_checksum_address(deployment.addresses["AAVE_POOL"]), "fromBlock": from_block, "toBlock": to_block,
            "topics": [LIQUIDATION_CALL_TOPIC, None, None, user_topic],
        })  # fmt: skip
    except Exception as exc:  # transport errors and malformed answers: name the read
        raise ChainReadError(f"eth_getLogs(AAVE_POOL LiquidationCall, {from_block}..{to_block}) failed: {exc}") from exc
    symbols = {v.lower(): k for k, v in deployment.addresses.items() if k in TOKEN_SYMBOLS}
    out = []
    for lg in logs:
        topics = lg["topics"]
        if len(topics) != 4 or len(bytes(lg["data"])) < 128:
            raise ChainReadError(f"LiquidationCall log {lg!r} does not have the event's shape")
        coll = "0x" + bytes(topics[1])[-20:].hex()
        debt = "0x" + bytes(topics[2])[-20:].hex()
        covered, seized, liquidator, _recv = abi_decode(["uint256", "uint256", "address", "bool"], bytes(lg["data"]))
        coll_sym, debt_sym = symbols.get(coll, coll), symbols.get(debt, debt)
        out.append(LiquidationEvent(
            tx_hash="0x" + bytes(lg["transactionHash"]).hex().removeprefix("0x"), log_index=lg["logIndex"],
            block_number=lg["blockNumber"], collateral_asset=coll_sym, debt_asset=debt_sym,
            debt_covered=covered / 10 ** TOKEN_DECIMALS.get(debt_sym, 18),
            collateral_seized=seized / 10 ** TOKEN_DECIMALS.get(coll_sym, 18),
            liquidator=to_checksum_address(liquidator),
        ))  # fmt: skip
    return out
