"""OutcomeVerification and post-execution invariants.

`verify_outcome` builds the structured record of an acted tick (pre-state, the simulation's prediction, post-state
with decoded receipts and logs, the deviations) and checks invariants deterministically; a violation comes back
as a `safety_incident` for the caller to write as an episode at confidence 1.0.
Why: docs/design/chain.md#verifying-outcomes.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Mapping, cast

from eth_abi import decode as abi_decode
from eth_typing import ABIEvent, HexStr
from eth_utils import event_abi_to_log_topic
from pydantic import BaseModel, Field
from web3 import Web3
from web3.exceptions import TransactionNotFound

from golem.chain.contracts import Deployment, key_abi, load_abi
from golem.chain.journal import TxJournal
from golem.chain.reader import read_snapshot
from golem.chain.tools.arguments import parse_arguments
from golem.chain.tools.calls import cached_at
from golem.chain.tools.schemas import COLLATERAL_TOKEN, DEBT_TOKEN, LP_PAIR, POOL_TOKEN0, POOL_TOKEN1
from golem.chain.tools.uniswap_swap import path_pairs, swap_path
from golem.chain.verify import GROUND_TRUTH_SOURCE, touches_pool_shares, tracked_pair, verify_actions
from golem.models.enums import ActionStatus
from golem.models.observation import ChainSnapshot, Observation
from golem.models.record import ActionRecord, OutcomeRecord
from golem.models.tick import ProposedAction, SimulationResult

SAFETY_INCIDENT_CONFIDENCE = 1.0  # a broken invariant is a fact, not an opinion


class DecodedLog(BaseModel):
    tx_hash: str
    log_index: int
    address: str
    contract: str | None  # deployment key, None for a contract we do not know
    event: str | None  # None when the topic matches no event of that contract
    args: dict[str, Any] = Field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.contract or self.address}.{self.event or 'unknown'}"


class Deviations(BaseModel):
    balance_change_bps: dict[str, float] = Field(default_factory=dict)
    gas_deviation_bps: float = 0.0
    unexpected_logs: list[DecodedLog] = Field(default_factory=list)
    missing_expected_logs: list[str] = Field(default_factory=list)


class ActionVerification(BaseModel):
    action_index: int
    tool: str
    tx_hashes: list[str] = Field(default_factory=list)
    receipt_status: list[str] = Field(default_factory=list)  # "success" | "reverted" | "missing"
    gas_used: int = 0
    expected_gas: int = 0
    logs: list[DecodedLog] = Field(default_factory=list)
    unexpected_logs: list[DecodedLog] = Field(default_factory=list)
    missing_expected_logs: list[str] = Field(default_factory=list)


class OutcomeVerification(BaseModel):
    golem_id: str
    tick: int
    pre_state: dict[str, Any]
    prediction: dict[str, Any]
    post_state: dict[str, Any]
    deviations: Deviations
    actions: list[ActionVerification] = Field(default_factory=list)
    outcome: OutcomeRecord
    invariant_violations: list[str] = Field(default_factory=list)
    safety_incident: dict[str, Any] | None = None


def _state(snap: ChainSnapshot) -> dict[str, Any]:
    return {
        "block": snap.block_number,
        "balances": dict(snap.balances),
        "positions": [p.model_dump() for p in snap.positions],
        "pool": snap.pool.model_dump(),
        "oracle_price": snap.oracle_price,
    }


@lru_cache(maxsize=None)
def _event_table(abi_name: str) -> dict[bytes, dict[str, Any]]:
    """topic0 → event ABI of one vendored ABI (parsed once)."""
    return {event_abi_to_log_topic(cast(ABIEvent, e)): e for e in load_abi(abi_name) if e.get("type") == "event"}


def _decode_event(event: dict[str, Any], topics: list[bytes], data: bytes) -> dict[str, Any]:
    """An event's arguments from its topics (indexed) and data (the rest), as web3 would decode them:
    addresses checksummed; an indexed dynamic value stays the hash the topic holds."""
    indexed = [i for i in event["inputs"] if i.get("indexed")]
    plain = [i for i in event["inputs"] if not i.get("indexed")]
    if len(topics) != len(indexed) + 1:
        raise ValueError(f"{event['name']}: {len(topics) - 1} indexed topics for {len(indexed)} indexed inputs")
    args: dict[str, Any] = {}
    for inp, topic in zip(indexed, topics[1:]):
        t = inp["type"]
        dynamic = t in ("string", "bytes") or t.endswith("]") or t.startswith("tuple")
        args[inp["name"]] = "0x" + topic.hex() if dynamic else abi_decode([t], topic)[0]
    for inp, value in zip(plain, abi_decode([i["type"] for i in plain], data)):
        args[inp["name"]] = value
    ordered = {i["name"]: args[i["name"]] for i in event["inputs"]}
    return {k: Web3.to_checksum_address(v) if isinstance(v, str) and Web3.is_address(v) and len(v) == 42 else v
            for k, v in ordered.items()}


class LogDecoder:
    """Decodes logs of the address book's contracts (pairs, router, Aave Pool, aTokens, debt tokens,
    ERC-20s, feeds) by topic0 against their vendored ABIs; everything else stays undecoded."""

    def __init__(self, w3: Web3, deployment: Deployment) -> None:
        self.by_address: dict[str, str] = {Web3.to_checksum_address(a): k for k, a in deployment.addresses.items()}
        self.abi_of: dict[str, str] = {k: key_abi(k) for k in deployment.addresses}

    def decode(self, log: Mapping[str, Any]) -> DecodedLog:
        address = Web3.to_checksum_address(log["address"])
        key = self.by_address.get(address)
        tx_hash = "0x" + bytes(log["transactionHash"]).hex().removeprefix("0x")
        base = DecodedLog(tx_hash=tx_hash, log_index=log["logIndex"], address=address, contract=key, event=None)
        topics = [bytes(t) for t in log["topics"]]
        if key is None or not topics:
            return base
        event = _event_table(self.abi_of[key]).get(topics[0])
        if event is None:
            return base
        try:
            decoded = _decode_event(event, topics, bytes(log["data"]))
        except Exception:  # a topic match whose data does not decode is itself suspicious: keep it raw
            return base.model_copy(update={"event": event["name"]})
        args = {k: (str(v) if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 2**53 else v)
                for k, v in decoded.items()}
        return base.model_copy(update={"event": event["name"], "args": args})


def _approval_labels(call_labels: list[str]) -> list[str]:
    """approve_<KEY> and revoke_<KEY> calls each emit <KEY>.Approval."""
    return [f"{lbl.split('_', 1)[1]}.Approval" for lbl in call_labels if lbl.startswith(("approve_", "revoke_"))]


def expected_log_labels(action: ProposedAction, call_labels: list[str]) -> list[str]:
    """Events an action's transactions must emit (address-book key.event, with multiplicity).

    swap: each hop's pair Swap and Sync, the token in sent to the first pair, each hop's output sent
    on (to the next pair, then to the golem). supply / withdraw / borrow / repay: the Aave Pool's event
    of that name, the underlying's Transfer and the aToken / variable debt token's Transfer (mint or
    burn). add_liquidity: both tokens sent to the pair, the pair's LP Transfer (mint), Sync and Mint.
    remove_liquidity: the LP sent to the pair and burned (two Transfers), both tokens out, Sync, Burn."""
    out = _approval_labels(call_labels)
    if action.tool == "swap":
        args = parse_arguments("swap", action.arguments)
        path = swap_path(args["token_in"], args["token_out"])
        out.append(f"{path[0]}.Transfer")
        for key, token_out in zip(path_pairs(path), path[1:]):
            out += [f"{token_out}.Transfer", f"{key}.Sync", f"{key}.Swap"]
        return out
    if action.tool == "add_liquidity":
        return out + [f"{POOL_TOKEN0}.Transfer", f"{POOL_TOKEN1}.Transfer", f"{LP_PAIR}.Transfer", f"{LP_PAIR}.Sync",
                      f"{LP_PAIR}.Mint"]
    if action.tool == "remove_liquidity":
        return out + [f"{LP_PAIR}.Transfer", f"{LP_PAIR}.Transfer", f"{POOL_TOKEN0}.Transfer", f"{POOL_TOKEN1}.Transfer",
                      f"{LP_PAIR}.Sync", f"{LP_PAIR}.Burn"]
    token = COLLATERAL_TOKEN if action.tool in ("supply", "withdraw") else DEBT_TOKEN
    receipt_token = f"A_{token}" if action.tool in ("supply", "withdraw") else f"VDEBT_{token}"
    return out + [f"AAVE_POOL.{action.tool.capitalize()}", f"{token}.Transfer", f"{receipt_token}.Transfer"]


def tolerated_log_labels(action: ProposedAction) -> set[str]:
    """Incidental events an action may emit beyond the required ones, and nothing else.

    Aave: the reserve's ReserveDataUpdated (indexes and rates, on every action), the aToken / debt
    token's Mint or Burn (Aave emits Mint instead of Burn when accrued interest exceeds the amount
    burned), the collateral flag switching on with a first supply or off when all of it is withdrawn.
    An extra pair Transfer on add_liquidity is the protocol fee's mint or the first deposit's
    MINIMUM_LIQUIDITY locked at address 0."""
    if action.tool in ("supply", "withdraw"):
        rt = f"A_{COLLATERAL_TOKEN}"
        return {"AAVE_POOL.ReserveDataUpdated", f"{rt}.Mint", f"{rt}.Burn", "AAVE_POOL.ReserveUsedAsCollateralEnabled",
                "AAVE_POOL.ReserveUsedAsCollateralDisabled"}
    if action.tool in ("borrow", "repay"):
        return {"AAVE_POOL.ReserveDataUpdated", f"VDEBT_{DEBT_TOKEN}.Mint", f"VDEBT_{DEBT_TOKEN}.Burn"}
    if action.tool == "add_liquidity":
        return {f"{LP_PAIR}.Transfer"}
    return set()


def check_logs(
    action: ProposedAction, call_labels: list[str], logs: list[DecodedLog]
) -> tuple[list[str], list[DecodedLog]]:
    """(missing, unexpected): each required label is matched by one log (with multiplicity); a log left
    over is unexpected unless its label is tolerated, so a second transfer of the golem's tokens, an
    event of another protocol or of a contract outside the address book is caught."""
    remaining = list(logs)
    missing = []
    for lbl in expected_log_labels(action, call_labels):
        hit = next((lg for lg in remaining if lg.label == lbl), None)
        if hit is None:
            missing.append(lbl)
        else:
            remaining.remove(hit)
    tolerated = tolerated_log_labels(action)
    return missing, [lg for lg in remaining if lg.label not in tolerated]


def verify_outcome(
    w3: Web3,
    deployment: Deployment,
    journal: TxJournal,
    golem_id: str,
    tick: int,
    account: str,
    actions: list[ProposedAction],
    simulation: SimulationResult,
    records: list[ActionRecord],
    pre: Observation,
    confirmations: int,
    *,
    max_trade_size_usd: float | None = None,
    timeout_s: float = 5.0,
    poll_s: float = 0.2,
) -> OutcomeVerification:
    """Step 8 in full: `verify_actions` (receipts, confirmations, balance deviations) plus the structured
    record and the invariants. Reads every journaled tx of every executed action."""
    outcome = verify_actions(w3, deployment, account, actions, simulation, records, pre, confirmations,
                             timeout_s=timeout_s, poll_s=poll_s)
    account = Web3.to_checksum_address(account)
    post = read_snapshot(w3, deployment, account)
    decoder = LogDecoder(w3, deployment)
    sims = {s.action_index: s for s in simulation.actions}
    by_index = {a.action_index: a for a in actions}
    known = set(decoder.by_address)
    violations: list[str] = []
    verifs: list[ActionVerification] = []

    for rec in records:
        if rec.status not in (ActionStatus.EXECUTED, ActionStatus.FAILED):
            continue
        action = by_index.get(rec.action_index)
        intents = journal.intents_for(golem_id, tick, rec.action_index)
        av = ActionVerification(action_index=rec.action_index, tool=rec.tool_name,
                                expected_gas=sims[rec.action_index].gas_estimate if rec.action_index in sims else 0)
        for intent in intents:
            av.tx_hashes.append(intent.tx_hash)
            try:
                receipt = w3.eth.get_transaction_receipt(HexStr(intent.tx_hash))
            except TransactionNotFound:
                receipt = None
            if receipt is None:
                av.receipt_status.append("missing")
                continue
            av.receipt_status.append("success" if receipt["status"] == 1 else "reverted")
            av.gas_used += receipt["gasUsed"]
            if Web3.to_checksum_address(receipt["from"]) != account:
                violations.append(f"tx {intent.tx_hash} was sent from {receipt['from']}, not the golem's {account}")
            to = receipt.get("to")
            if to is None or Web3.to_checksum_address(to) not in known:
                violations.append(f"tx {intent.tx_hash} called {to}, a contract outside the deployment")
            av.logs += [decoder.decode(lg) for lg in receipt["logs"]]
        if action is not None and rec.status is ActionStatus.EXECUTED:
            av.missing_expected_logs, av.unexpected_logs = check_logs(action, [i.label for i in intents], av.logs)
        for lg in av.unexpected_logs:
            violations.append(f"unexpected log {lg.label} in tx {lg.tx_hash} (log {lg.log_index})")
        for lbl in av.missing_expected_logs:
            violations.append(f"action {rec.action_index} ({rec.tool_name}): expected log {lbl} is missing")
        verifs.append(av)

    # Exact-amount approvals must be used up: nothing may stay approved to a spender after the tick.
    # The spenders are the real ones (Router02, the Aave Pool); a pair's LP token counts like any ERC-20.
    checked: set[tuple[str, str]] = set()
    for av in verifs:
        for lg in av.logs:
            parties = list(lg.args.values())[:2]  # (owner, spender): WETH9 names them src, guy
            if lg.event != "Approval" or lg.contract is None or len(parties) < 2 or parties[0] != account:
                continue
            spender = parties[1]
            if (lg.contract, spender) in checked:
                continue
            checked.add((lg.contract, spender))
            left = cached_at(w3, lg.address, "ERC20").functions.allowance(account, spender).call()
            if left:
                who = decoder.by_address.get(Web3.to_checksum_address(spender), spender)
                violations.append(f"lingering approval: {left} {lg.contract} base units still approved to {who}")
    # Token amount bounds: the value lost by the whole tick stays within the policy's trade size.
    if max_trade_size_usd is not None and outcome.pnl_impact is not None and -outcome.pnl_impact > max_trade_size_usd:
        violations.append(f"the tick lost ${-outcome.pnl_impact:,.2f}, more than max_trade_size_usd ${max_trade_size_usd:,.2f}")
    # A golem action must never leave the position liquidatable.
    hf = [p.health_factor for p in post.positions if p.health_factor is not None]
    if hf and min(hf) < 1.0 and verifs:
        violations.append(f"health factor {min(hf):.3f} < 1.0 after execution: the position is liquidatable")

    gas_used = sum(a.gas_used for a in verifs)
    gas_expected = sum(a.expected_gas for a in verifs)
    devs = Deviations(
        balance_change_bps=dict(outcome.deviations_bps),
        gas_deviation_bps=(gas_used - gas_expected) / gas_expected * 1e4 if gas_expected else 0.0,
        unexpected_logs=[lg for a in verifs for lg in a.unexpected_logs],
        missing_expected_logs=[lbl for a in verifs for lbl in a.missing_expected_logs],
    )
    run = [r for r in records if r.status in (ActionStatus.EXECUTED, ActionStatus.FAILED)]
    before, after = tracked_pair(w3, deployment, account, pre.snapshot, post, touches_pool_shares(actions, run))
    incident = None
    if violations:
        incident = {
            "kind": "safety_incident", "confidence": SAFETY_INCIDENT_CONFIDENCE, "golem_id": golem_id,
            "tick": tick, "violations": violations, "ground_truth_source": GROUND_TRUTH_SOURCE,
        }  # fmt: skip
    return OutcomeVerification(
        golem_id=golem_id, tick=tick,
        pre_state={**_state(pre.snapshot), "tracked": before},
        prediction={
            "expected": {str(s.action_index): s.expected for s in simulation.actions},
            "expected_gas": gas_expected,
            "would_revert": any(not s.ok for s in simulation.actions),
        },
        post_state={**_state(post), "tracked": after, "receipts": [
            {"action_index": a.action_index, "status": a.receipt_status, "gas_used": a.gas_used} for a in verifs]},
        deviations=devs, actions=verifs, outcome=outcome.model_copy(update={
            "verified": outcome.verified and not violations,
            # what Reflexion compares with the expectation: the re-read min health factors
            "health_factor_before": pre.min_health_factor(), "health_factor_after": min(hf) if hf else None}),
        invariant_violations=violations, safety_incident=incident,
    )  # fmt: skip
