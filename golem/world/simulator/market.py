"""The market simulator: each `step()` posts the feeds one step along the scenario's path, lets the trader
arbitrage and the liquidator liquidate. All transactions of a phase are pipelined and then awaited; reads go
out as one JSON-RPC batch. Keys stay inside."""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal

from eth_account import Account
from hexbytes import HexBytes
from pydantic import BaseModel, Field
from web3 import Web3
from web3.exceptions import BadFunctionCallOutput, ContractLogicError

from golem.chain.contracts import FEED_DECIMALS, MAIN_PAIR, PAIRS, STABLE_SYMBOLS, TOKEN_SYMBOLS, Deployment, contract
from golem.chain.reader import ChainReadError, _Read, _eth_call, _quantity, _uint256, _words
from golem.world.deploy import TxSender, checked_receipts
from golem.world.simulator.liquidator import BORROW_TOPIC, WAD, Liquidator, SimLiquidation
from golem.world.simulator.paths import (
    DEFAULT_CRASH_AFTER,
    MIN_PRICE,
    SCENARIOS,
    STABLE_DEVIATION,
    STABLE_SIGMA,
    SimulatorError,
    feed_answer,
    scenario_return,
)
from golem.world.simulator.trader import MAX_TRADE_FRACTION, MAX_UINT256, NOISE_FRACTION, UNCAPPED_FRACTION, Pair


class SimStep(BaseModel):
    step: int
    oracle_price: float  # USD per WETH the ETH/USD feed answers after this step (the path's value)
    pool_price: float  # USDC per WETH from the WETH/USDC pair's reserves after this step's trades
    trade_side: Literal["buy", "sell", "none"]  # WETH/USDC arbitrage trade: buy/sell WETH against USDC
    trade_size: float  # WETH (human units) bought or sold by that arbitrage trade
    round_id: int = 0  # the ETH/USD feed's latest round id after the step
    pair_prices: dict[str, float] = Field(default_factory=dict)  # pair key → stable per WETH after the step
    stables_posted: dict[str, float] = Field(default_factory=dict)  # stable → answer posted this step
    # watched borrower → health factor at this step's prices, as the liquidator read it (None: no debt)
    health_factors: dict[str, float | None] = Field(default_factory=dict)
    liquidations: list[SimLiquidation] = Field(default_factory=list)
    liquidation_failures: list[str] = Field(default_factory=list)  # a liquidationCall that reverted, and why


def _is_minter(token: Any, account: str) -> bool:
    """Whether `account` may mint `token`: Circle's USDC and the world's Vyper token both answer isMinter; a token
    without it (a fork's DAI) is not ours to mint."""
    try:
        return bool(token.functions.isMinter(account).call())
    except (ContractLogicError, BadFunctionCallOutput):
        return False


class MarketSimulator(Liquidator):
    """Drives one deployed world. Keys stay inside; nothing here logs or returns them.

    `trader_key` trades the pairs and liquidates; `oracle_key` is the feeds' owner (in the dev world the
    deployer, who is also the stables' minter and so can top the trader up).
    """

    def __init__(
        self,
        w3: Web3,
        deployment: Deployment,
        trader_key: str,
        oracle_key: str,
        scenario: str,
        seed: int = 0,
        crash_after: int = DEFAULT_CRASH_AFTER,
        max_trade_fraction: float = MAX_TRADE_FRACTION,
        noise_fraction: float = NOISE_FRACTION,
        watch: Iterable[str] = (),
        liquidate: bool = True,
    ) -> None:
        if scenario not in SCENARIOS:
            raise SimulatorError(f"unknown scenario {scenario!r}; choose one of {', '.join(SCENARIOS)}")
        if crash_after < 0:
            raise SimulatorError(f"crash_after must be >= 0, got {crash_after}")
        if not 0 < max_trade_fraction <= 0.5:
            raise SimulatorError(f"max_trade_fraction must be in (0, 0.5], got {max_trade_fraction}")
        chain_id = w3.eth.chain_id
        if chain_id != deployment.chain_id:
            raise SimulatorError(
                f"the RPC answers chain id {chain_id} but the deployment is for chain {deployment.chain_id}"
            )
        self.w3 = w3
        self.deployment = deployment
        self.chain_id = chain_id
        self.scenario = scenario
        self.seed = seed
        self.crash_after = crash_after
        self.max_trade_fraction = max_trade_fraction
        self.noise_fraction = noise_fraction
        self.liquidate = liquidate
        self.step_index = 0
        # separate streams: the feed path depends on the seed alone (== oracle_path(...)),
        # not on how many random draws the trades or the stables took
        self._price_rng = random.Random(seed)
        self._trade_rng = random.Random(f"{seed}:trades")
        self._stable_rng = random.Random(f"{seed}:stables")
        self._trader = TxSender.for_key(w3, trader_key, chain_id)
        oracle_account = Account.from_key(oracle_key)
        self._oracle = (
            self._trader if oracle_account.address == self._trader.address else TxSender.for_key(w3, oracle_key, chain_id)
        )
        a = deployment.addresses
        self.symbols = [s for s in TOKEN_SYMBOLS if s in a]
        self.stables = [s for s in STABLE_SYMBOLS if s in a and f"FEED_{s}" in a]
        self.pairs = [Pair(deployment, k) for k in PAIRS if k in a]
        self._tokens = {s: contract(w3, deployment, s) for s in self.symbols}
        self._feeds = {s: contract(w3, deployment, f"FEED_{s}") for s in ["WETH", *self.stables]}
        self._router = contract(w3, deployment, "UNI_ROUTER")
        self._aave = contract(w3, deployment, "AAVE_POOL")
        for sym, feed in self._feeds.items():
            owner = feed.functions.owner().call()
            if owner != self._oracle.address:
                raise SimulatorError(
                    f"oracle_key is for {self._oracle.address}, but the FEED_{sym} owner is {owner}: "
                    "give the key of the account that deployed the feeds (GOLEM_SIM_ORACLE_KEY)"
                )
        # the feed owner is the deployer = minter in the dev world; then it can top the trader up
        self._can_mint = {s: _is_minter(self._tokens[s], self._oracle.address) for s in self.symbols if s != "WETH"}
        self.oracle_price = self._feeds["WETH"].functions.latestAnswer().call() / 10**FEED_DECIMALS
        self._stable_value = {s: 1.0 for s in self.stables}  # the stables' own market price (~1.0)
        self.watched: list[str] = []
        for acct in [deployment.golem_account, *watch]:
            self.watch(acct)
        # Borrow events are scanned from the deployment on (a resolved book of a real chain: from now)
        self._scan_from = deployment.deployed_block if deployment.deployed_block > 0 else w3.eth.block_number
        self._ensure_allowances()

    @property
    def trader_address(self) -> str:
        return self._trader.address

    # ---- reads --------------------------------------------------------------------------------------

    def _read_state(self, control: Sequence[tuple[str, list[Any]]] = ()) -> dict[str, Any]:
        """Pairs, the trader's balances and nonce, the feed owner's nonce, every feed's latest round, the head (and
        `control`'s calls in the same batch)."""
        a, t = self.deployment.addresses, self._trader.address
        reads = [
            _Read("trader nonce", "eth_getTransactionCount", [t, "pending"]),
            _Read("oracle nonce", "eth_getTransactionCount", [self._oracle.address, "pending"]),
            _Read("eth_getBlockByNumber(latest)", "eth_getBlockByNumber", ["latest", False]),
            _Read(f"eth_getBalance({t})", "eth_getBalance", [t, "latest"]),
        ]
        reads += [_eth_call(f"{p.key}.getReserves()", p.address, "getReserves()") for p in self.pairs]
        reads += [_eth_call(f"{s}.balanceOf({t})", a[s], "balanceOf(address)", t) for s in self.symbols]
        reads += [_eth_call(f"FEED_{s}.latestRoundData()", f.address, "latestRoundData()") for s, f in self._feeds.items()]
        res = self._batch(reads, control)
        block = res[2]
        if not isinstance(block, dict):
            raise ChainReadError(f"eth_getBlockByNumber(latest): malformed block {block!r}")
        base_fee = block.get("baseFeePerGas")
        i = 4
        reserves = {}
        for p in self.pairs:
            reserves[p.key] = p.reserves(_words(reads[i], res[i], 3))
            i += 1
        balances = {}
        for s in self.symbols:
            balances[s] = _uint256(reads[i], res[i])
            i += 1
        rounds = {}
        for s in self._feeds:
            rid, answer, _started, updated_at, _ans = _words(reads[i], res[i], 5)
            rounds[s] = (rid, answer, updated_at)
            i += 1
        return {
            "trader_nonce": _quantity(reads[0], res[0]),
            "oracle_nonce": _quantity(reads[1], res[1]),
            "base_fee": _quantity(reads[2], base_fee) if base_fee is not None else -1,
            "block_number": _quantity(reads[2], block["number"]),
            "timestamp": _quantity(reads[2], block["timestamp"]),
            "eth": _quantity(reads[3], res[3]),
            "reserves": reserves,
            "balances": balances,
            "rounds": rounds,
        }

    def _begin_batch(self, control: Sequence[tuple[str, list[Any]]] = ()) -> dict[str, Any]:
        """Read pairs, balances, nonces, rounds and the fee market once; the senders' nonces and fees follow."""
        state = self._read_state(control)
        base_fee = state["base_fee"] if state["base_fee"] >= 0 else None
        self._trader.refresh(base_fee, state["trader_nonce"])
        if self._oracle is not self._trader:
            self._oracle.refresh(base_fee, state["oracle_nonce"])
        return state

    def _read_after(self, scan_to: int, receipts: Sequence[tuple[str, HexBytes]] = ()) -> dict[str, Any]:
        """After the step's trades: pair prices, the ETH/USD round, watched borrowers' health, new borrowers (and the
        receipts of `receipts`, mined already, in the same batch)."""
        a = self.deployment.addresses
        reads = [_eth_call(f"{p.key}.getReserves()", p.address, "getReserves()") for p in self.pairs]
        reads.append(_eth_call("FEED_WETH.latestRoundData()", a["FEED_WETH"], "latestRoundData()"))
        reads += [
            _eth_call(f"AAVE_POOL.getUserAccountData({u})", a["AAVE_POOL"], "getUserAccountData(address)", u)
            for u in self.watched
        ]
        scan = scan_to >= self._scan_from
        if scan:
            reads.append(_Read(f"eth_getLogs(AAVE_POOL Borrow, {self._scan_from}..{scan_to})", "eth_getLogs", [{
                "address": a["AAVE_POOL"], "fromBlock": hex(self._scan_from), "toBlock": hex(scan_to),
                "topics": [BORROW_TOPIC],
            }]))  # fmt: skip
        n = len(reads)
        reads += [_Read(f"{name}: receipt of {h.hex()}", "eth_getTransactionReceipt", ["0x" + h.hex().removeprefix("0x")])
                  for name, h in receipts]
        res = self._batch(reads)
        checked = checked_receipts(receipts, res[n:])
        prices = {}
        for k, p in enumerate(self.pairs):
            prices[p.key] = p.price(*p.reserves(_words(reads[k], res[k], 3)))
        k = len(self.pairs)
        round_id = _words(reads[k], res[k], 5)[0]
        health: dict[str, int] = {}
        for j, u in enumerate(self.watched):
            words = _words(reads[k + 1 + j], res[k + 1 + j], 6)
            health[u] = words[5] if words[1] > 0 else MAX_UINT256  # no debt: infinite health
        if scan:
            logs = res[n - 1]
            if not isinstance(logs, list):
                raise ChainReadError(f"{reads[n - 1].name}: expected a list of logs, got {logs!r}")
            for lg in logs:
                topics = lg.get("topics") or []
                if len(topics) >= 3:
                    self.watch("0x" + topics[2][-40:])  # onBehalfOf: whose debt it is
            self._scan_from = scan_to + 1
        return {"prices": prices, "round_id": round_id, "health": health, "receipts": checked}


    def _post_feeds(self, state: dict[str, Any], weth_price: float, stable_prices: dict[str, float], now: int,
                    force_weth: bool, steps: list[tuple[str, HexBytes]]) -> dict[str, float]:
        """Post the ETH/USD round (always when forced, else on a changed answer or half a heartbeat), and each
        stable's round on deviation or half a heartbeat (Chainlink's two triggers). Returns the stables posted."""
        rounds = state["rounds"]

        def due(sym: str, answer: int) -> bool:
            _rid, last, updated_at = rounds[sym]
            heartbeat = self.deployment.heartbeat_s(sym)
            stale_soon = heartbeat is not None and now - updated_at >= heartbeat / 2
            if sym == "WETH":
                return force_weth or answer != last or stale_soon
            return stale_soon or abs(answer / last - 1.0) > STABLE_DEVIATION if last > 0 else True

        weth_answer = feed_answer(weth_price)
        if due("WETH", weth_answer):
            steps.append(("ETH/USD post_round", self._oracle.call_fn(self._feeds["WETH"], "post_round", weth_answer)))
        posted = {}
        for sym, price in stable_prices.items():
            answer = feed_answer(price)
            if due(sym, answer):
                steps.append((f"{sym}/USD post_round", self._oracle.call_fn(self._feeds[sym], "post_round", answer)))
                posted[sym] = answer / 10**FEED_DECIMALS
        return posted

    def _finish(self, i: int, price: float, steps: list[tuple[str, HexBytes]], state: dict[str, Any],
                side: str, size: float, stables_posted: dict[str, float]) -> SimStep:
        if self._outbox is None:
            receipts = self._settle(steps)
            after = self._read_after(max([int(r["blockNumber"]) for r in receipts], default=state["block_number"]))
        else:  # a one-block row: mined now, the receipts read with what follows (its head: the blocks it mined)
            self._settle([])
            after = self._read_after(state["block_number"] + self.mined, receipts=steps)
        liquidations, failures = self._liquidate(after["health"])
        self.oracle_price = price
        self.step_index += 1
        prices = after["prices"]
        return SimStep(
            step=i, oracle_price=price, pool_price=prices.get(MAIN_PAIR, 0.0),
            trade_side=side if size > 0 else "none", trade_size=size,  # type: ignore[arg-type]
            round_id=after["round_id"], pair_prices=prices, stables_posted=stables_posted,
            health_factors={u: None if hf == MAX_UINT256 else hf / WAD for u, hf in after["health"].items()},
            liquidations=liquidations, liquidation_failures=failures,
        )  # fmt: skip

    def step(self) -> SimStep:
        """One market step along the scenario: feed rounds, arbitrage and noise on every pair, the liquidator."""
        i = self.step_index
        state = self._begin_batch()

        move = scenario_return(self.scenario, i, self._price_rng, self.crash_after)
        new_price = max(MIN_PRICE, self.oracle_price * (1.0 + move))
        for s in self.stables:
            self._stable_value[s] = 1.0 + self._stable_rng.gauss(0.0, STABLE_SIGMA)
        noise = [(self._trade_rng.random() < 0.5, abs(self._trade_rng.gauss(0.0, self.noise_fraction))) for _ in self.pairs]

        steps: list[tuple[str, HexBytes]] = []
        posted = self._post_feeds(state, new_price, dict(self._stable_value), state["timestamp"], True, steps)
        stable_usd = {s: state["rounds"][s][1] / 10**FEED_DECIMALS for s in self.stables}
        stable_usd.update(posted)
        side, size = "none", 0.0
        for pair, (buy, scale) in zip(self.pairs, noise):
            target = new_price / stable_usd.get(pair.stable, 1.0)
            s, z = self._trade_pair(pair, state, target, self.max_trade_fraction, False, "arbitrage", steps)
            if pair.key == MAIN_PAIR:
                side, size = s, z
            # a small noise trade so the pair never sits exactly on the feed
            self._noise(pair, state, buy, scale, steps)
        return self._finish(i, new_price, steps, state, side, size, posted)

    def move_to(self, oracle_price: float, pool_price: float, noise_volume_usd: float = 0.0,
                at: int | None = None, state: dict[str, Any] | None = None) -> SimStep:
        """Set the world to a recorded row (the backtest's replay driver): the ETH/USD feed answers `oracle_price`
        (a round is posted when the answer changes, or when half its heartbeat has passed at time `at`; the
        stables post 1.0 on the same heartbeat rule), `noise_volume_usd` trades round-trip through the WETH/USDC
        pair (half bought, half sold back), then one uncapped arbitrage trade takes each pair exactly to
        `pool_price`. Feed and pairs may diverge. The liquidator then runs as in `step`. `state`: what `begin_row`
        read, when the caller read it."""
        i = self.step_index
        state = state if state is not None else self._begin_batch()
        oracle_price = max(MIN_PRICE, oracle_price)
        now = at if at is not None else state["timestamp"]
        steps: list[tuple[str, HexBytes]] = []
        posted = self._post_feeds(state, oracle_price, {s: 1.0 for s in self.stables}, now, False, steps)
        side, size = "none", 0.0
        for pair in self.pairs:
            if pair.key == MAIN_PAIR:
                half = int(noise_volume_usd / 2 * pair.stable_unit)
                if half > 0:
                    self._round_trip(pair, state, half, "volume", steps)
            s, z = self._trade_pair(pair, state, pool_price, UNCAPPED_FRACTION, True, "replay", steps)
            if pair.key == MAIN_PAIR:
                side, size = s, z
        return self._finish(i, oracle_price, steps, state, side, size, posted)

    def begin_row(self, control: Sequence[tuple[str, list[Any]]] = ()) -> dict[str, Any]:
        """The chain state a `move_to` starts from (one JSON-RPC batch, with `control`'s calls), its senders refreshed."""
        return self._begin_batch(control)

    @property
    def sent(self) -> int:
        """Transactions the trader and the feeds' owner have sent (their next nonces)."""
        return self._trader.nonce + (self._oracle.nonce if self._oracle is not self._trader else 0)

    @contextmanager
    def one_block(self, with_first: Sequence[tuple[str, list[Any]]] = ()) -> Iterator[None]:
        """Within: every send is held and sent with the others of its block in one JSON-RPC batch, then mined with
        `evm_mine` (the caller turned the node's automine off); `with_first`'s calls go with the first batch.
        `mined` counts the blocks. A stable's top-up for a swap gets a block before the swap."""
        outbox: list[tuple[HexBytes, HexBytes]] = []
        self._outbox, self._with_first, self.mined = outbox, list(with_first), 0
        self._trader.outbox = self._oracle.outbox = outbox
        try:
            yield
            self._settle([])  # anything left (a row that sent nothing still takes its calls)
        finally:
            self._trader.outbox = self._oracle.outbox = None
            self._outbox, self._with_first = None, []

    def run(self, steps: int) -> list[SimStep]:
        return [self.step() for _ in range(steps)]
