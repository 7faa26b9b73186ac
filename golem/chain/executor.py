"""Step 7 EXECUTE: one permitted action → signed transactions on chain, exactly once.

Consume the permit, freeze the calls in the tx journal, then per call re-broadcast a journaled intent's same raw
bytes or sign and journal a new one, wait for the receipt; cleanup calls run last. No write without a permit; the
signer key never appears in a record, log line or exception. The protocol: docs/design/chain.md#writing-exactly-once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, cast

from eth_account.signers.local import LocalAccount
from eth_typing import HexStr
from web3 import Web3
from web3.exceptions import ContractLogicError, TimeExhausted, TransactionNotFound, Web3RPCError
from web3.types import TxParams, TxReceipt

from golem.chain.contracts import Deployment
from golem.chain.journal import IntentStatus, TxIntent, TxJournal
from golem.chain.permits import ActionPermit, PermitError, PermitStatus, PermitStore
from golem.chain.simulate import SimulationError, decode_revert, simulate_calls
from golem.chain.tools.build import build_calls
from golem.chain.tools.calls import PlannedCall
from golem.chain.tools.schemas import ACTION_TYPES, ToolArgumentError
from golem.chain.tools.valuation import action_value_usd, price_usd
from golem.models.enums import ActionStatus
from golem.models.observation import Observation
from golem.models.record import ActionRecord
from golem.models.tick import ProposedAction

log = logging.getLogger(__name__)

DEFAULT_RECEIPT_TIMEOUT_S = 30.0
GAS_LIMIT_MARGIN = 1.2  # estimate × 1.2: room for state drift between estimate and inclusion
# ...plus a fixed headroom: a Uniswap V2 burn once ran a 1.2× limit out of gas in CI (its storage writes
# depend on the block it lands in). Unused gas is not charged, so headroom costs nothing but reserve.
GAS_LIMIT_HEADROOM = 60_000


class ExecutionError(RuntimeError):
    """The executor could not carry out a call for a reason other than a revert."""


class TransactionPendingError(ExecutionError):
    """Broadcast, but no receipt within the timeout. Retrying execute is safe: the journal holds the
    intent and the retry looks the hash up instead of sending again."""


def blocked_record(action: ProposedAction, reason: str, permit_id: str | None = None) -> ActionRecord:
    """The record of an action validation refused (nothing was sent)."""
    return ActionRecord(
        action_index=action.action_index,
        action_type=ACTION_TYPES.get(action.tool, action.tool),
        tool_name=action.tool,
        permit_id=permit_id,
        status=ActionStatus.BLOCKED,
        block_reason=reason,
    )


class Executor:
    def __init__(
        self,
        w3: Web3,
        deployment: Deployment,
        signer: LocalAccount,
        journal: TxJournal,
        permits: PermitStore,
        *,
        receipt_timeout_s: float = DEFAULT_RECEIPT_TIMEOUT_S,
        poll_latency_s: float = 0.1,
        on_event: Callable[[str, TxIntent], None] | None = None,
    ) -> None:
        if receipt_timeout_s <= 0:
            raise ValueError(f"receipt_timeout_s must be > 0, got {receipt_timeout_s}")
        self.w3 = w3
        self.deployment = deployment
        self._signer = signer  # private: the key stays inside this object
        self.account = Web3.to_checksum_address(signer.address)
        self.journal = journal
        self.permits = permits
        self.receipt_timeout_s = receipt_timeout_s
        self.poll_latency_s = poll_latency_s
        # Observer of the exactly-once protocol: ("signed", intent) once journaled, ("broadcast", intent)
        # once the node accepted it. Tests use it to crash the process inside each window.
        self._on_event = on_event or (lambda _event, _intent: None)

    def __repr__(self) -> str:
        return f"Executor(account={self.account}, chain_id={self.deployment.chain_id})"

    # ── public ──────────────────────────────────────────────────────────────────────────────

    def execute(
        self, golem_id: str, tick: int, action: ProposedAction, permit_id: str, observation: Observation
    ) -> ActionRecord:
        """Carry out one permitted action; safe to call again for the same (golem, tick, action)."""
        permit = self._authorize(golem_id, tick, action, permit_id, observation)
        idx = action.action_index
        plan = self.journal.get_plan(golem_id, tick, idx)
        if plan is None:
            try:
                calls = build_calls(self.w3, self.deployment, self.account, action, observation)
            except ToolArgumentError as e:
                # The chain moved since validation so the action no longer fits its arguments (an
                # add_liquidity whose ratio drifted past its bound, a remove with no shares left):
                # nothing is sent, and the permit stays spent.
                return ActionRecord(
                    action_index=idx, action_type=ACTION_TYPES.get(action.tool, action.tool), tool_name=action.tool,
                    permit_id=permit.id, status=ActionStatus.FAILED,
                    block_reason=f"not sent: {e}",
                )  # fmt: skip
            plan = self.journal.record_plan(golem_id, tick, idx, permit.id, [c.model_dump() for c in calls])
        elif plan.permit_id != permit.id:
            raise PermitError(
                f"action {idx} of tick {tick} was planned under permit {plan.permit_id}, not {permit.id}"
            )
        calls = [PlannedCall.model_validate(c) for c in plan.calls]
        eth_usd = price_usd("WETH", observation)

        gas_used = 0
        gas_wei = 0
        main_hash: str | None = None
        main_block: int | None = None
        failure: str | None = plan.failed_reason
        for i, call in enumerate(calls):
            # after a failure only cleanup calls run (a revoke of the approve that did go out)
            if failure is not None and not call.cleanup:
                continue
            intent = self.journal.get(golem_id, tick, idx, i)
            if intent is None:
                if call.only_if_nonzero is not None and not self._needed(call):
                    continue  # nothing to clean up (the allowance was used up); a retry checks again
                signed = self._sign_new(golem_id, tick, idx, i, call)
                if isinstance(signed, str):  # would revert: send nothing more but the cleanup
                    if failure is None:
                        failure = signed
                        self.journal.mark_plan_failed(golem_id, tick, idx, failure)
                    continue
                intent = signed
            intent = self._settle(intent, call)
            gas_used += intent.gas_used or 0
            gas_wei += (intent.gas_used or 0) * (intent.effective_gas_price or 0)
            if call.main or main_hash is None:
                main_hash, main_block = intent.tx_hash, intent.block_number
            if intent.status is IntentStatus.FAILED and failure is None:
                failure = f"{call.label} reverted: {intent.error or 'no reason'}"

        return ActionRecord(
            action_index=idx,
            action_type=ACTION_TYPES.get(action.tool, action.tool),
            tool_name=action.tool,
            permit_id=permit.id,
            tx_hash=main_hash,
            status=ActionStatus.FAILED if failure else ActionStatus.EXECUTED,
            block_reason=failure,
            gas_used=gas_used,
            gas_cost=gas_wei / 1e18 * eth_usd,
            block_number=main_block,
        )

    def cancel(self, action: ProposedAction, permit_id: str, reason: str) -> ActionRecord:
        """Cancel a permitted action that was not sent (e.g. a high-severity steer arrived)."""
        self.permits.cancel(permit_id, reason)
        record = blocked_record(action, reason, permit_id)
        return record.model_copy(update={"status": ActionStatus.CANCELLED})

    # ── permit ──────────────────────────────────────────────────────────────────────────────

    def _authorize(
        self, golem_id: str, tick: int, action: ProposedAction, permit_id: str, observation: Observation
    ) -> ActionPermit:
        if not permit_id:
            raise PermitError("execute needs a permit id: writes are only sent for actions validation approved")
        permit = self.permits.get(permit_id)
        if permit is None:
            raise PermitError(f"unknown permit {permit_id!r}: writes need a permit issued by validation")
        where = (golem_id, tick, action.action_index)
        if (permit.golem_id, permit.tick, permit.action_index) != where:
            raise PermitError(
                f"permit {permit_id} was issued for golem {permit.golem_id} tick {permit.tick} action "
                f"{permit.action_index}, not golem {golem_id} tick {tick} action {action.action_index}"
            )
        value = action_value_usd(action, observation)
        if permit.status is PermitStatus.COMMITTED:
            # A retry of this very action: the permit was spent on it; the journal keeps it at one send.
            if permit.tool != action.tool:
                raise PermitError(f"permit {permit_id} is for tool {permit.tool!r}, not {action.tool!r}")
            if value > permit.value_limit_usd * (1 + 1e-9) + 1e-9:
                raise PermitError(
                    f"permit {permit_id} allows ${permit.value_limit_usd:,.2f}, the action is worth ${value:,.2f}"
                )
            return permit
        return self.permits.consume(permit_id, action.tool, value)

    # ── signing ─────────────────────────────────────────────────────────────────────────────

    def _fees(self) -> dict[str, int]:
        base = self.w3.eth.get_block("latest").get("baseFeePerGas")
        if base is None:
            return {"gasPrice": self.w3.eth.gas_price}
        tip = self.w3.eth.max_priority_fee
        return {"maxFeePerGas": 2 * base + tip, "maxPriorityFeePerGas": tip, "type": 2}

    def _sign_new(self, golem_id: str, tick: int, idx: int, call_index: int, call: PlannedCall) -> TxIntent | str:
        """Sign a call and journal it (not yet sent). Returns a reason string if it would revert."""
        params: dict[str, Any] = {"from": self.account, "to": call.to, "data": call.data, "value": call.value}
        try:
            gas = self.w3.eth.estimate_gas(cast(TxParams, params))
        except ContractLogicError as e:
            reason = decode_revert(e.data) or e.message or "reverted"
            return f"{call.label} would revert: {reason} (not sent)"
        gas = max(gas, self._next_block_gas(call))
        tx: dict[str, Any] = {
            "chainId": self.deployment.chain_id,
            "to": call.to,
            "data": call.data,
            "value": call.value,
            "gas": int(gas * GAS_LIMIT_MARGIN) + GAS_LIMIT_HEADROOM,
            "nonce": self.w3.eth.get_transaction_count(Web3.to_checksum_address(self.account), "pending"),
            **self._fees(),
        }
        try:
            signed = self._signer.sign_transaction(tx)
        except Exception as e:  # never let a signing error carry more than its type out of here
            raise ExecutionError(f"signing {call.label} failed ({type(e).__name__})") from None
        raw = "0x" + bytes(signed.raw_transaction).hex()
        tx_hash = "0x" + bytes(signed.hash).hex()
        intent = self.journal.record_intent(
            golem_id, tick, idx, call_index, nonce=tx["nonce"], raw_tx=raw, tx_hash=tx_hash, label=call.label
        )
        log.info("journaled %s tx %s nonce %d (golem %s tick %d action %d)", call.label, tx_hash, tx["nonce"], golem_id, tick, idx)
        self._on_event("signed", intent)
        return intent

    def _next_block_gas(self, call: PlannedCall) -> int:
        """Gas the call uses in a block one second after the latest (0 if the node cannot say).

        eth_estimateGas runs in a block with the latest block's timestamp on Anvil, where a Uniswap V2
        pair skips its price-accumulator writes and Aave its index updates; the block the tx lands in is
        later and costs more (a swap ~45k more), so a limit from the estimate alone can run out of gas."""
        try:
            (outcome,) = simulate_calls(self.w3, self.account, [call])
        except (SimulationError, ValueError, Web3RPCError):
            return 0
        return outcome.gas_used if outcome.ok else 0

    # ── broadcast and receipt ───────────────────────────────────────────────────────────────

    def _settle(self, intent: TxIntent, call: PlannedCall) -> TxIntent:
        """Bring an intent to mined/failed: broadcast only if the chain does not know the hash."""
        if intent.status in (IntentStatus.MINED, IntentStatus.FAILED):
            return intent
        key = (intent.golem_id, intent.tick, intent.action_index, intent.call_index)
        receipt = self._receipt(intent.tx_hash)
        if receipt is None and not self._in_mempool(intent.tx_hash):
            try:
                self.w3.eth.send_raw_transaction(HexStr(intent.raw_tx))
                log.info("broadcast %s tx %s", intent.label, intent.tx_hash)
            except Web3RPCError as e:
                msg = str(e).lower()
                if "already known" in msg:
                    pass
                elif "nonce too low" in msg and self._receipt(intent.tx_hash) is None:
                    return self.journal.mark_failed(
                        *key, error=f"nonce {intent.nonce} was taken by another transaction; {intent.tx_hash} can never be mined"
                    )
                else:
                    raise ExecutionError(f"broadcasting {intent.label} tx {intent.tx_hash} failed: {e}") from None
            self._on_event("broadcast", self.journal.mark_sent(*key))
        elif intent.status is IntentStatus.SIGNED:
            self.journal.mark_sent(*key)  # the node had it: a previous attempt sent it before crashing
        if receipt is None:
            try:
                receipt = self.w3.eth.wait_for_transaction_receipt(
                    HexStr(intent.tx_hash), timeout=self.receipt_timeout_s, poll_latency=self.poll_latency_s
                )
            except TimeExhausted:
                raise TransactionPendingError(
                    f"{intent.label} tx {intent.tx_hash} (nonce {intent.nonce}) has no receipt after "
                    f"{self.receipt_timeout_s:g}s; retry execute to keep waiting (it will not resend)"
                ) from None
        ok = receipt["status"] == 1
        error = None if ok else self._revert_reason(call, receipt)
        return self.journal.mark_mined(
            *key,
            block_number=receipt["blockNumber"],
            gas_used=receipt["gasUsed"],
            effective_gas_price=receipt.get("effectiveGasPrice") or 0,
            success=ok,
            error=error,
        )

    def _needed(self, call: PlannedCall) -> bool:
        """Does the call's check (e.g. the allowance a revoke would clear) read non-zero right now?"""
        check = call.only_if_nonzero
        assert check is not None
        raw = self.w3.eth.call(cast(TxParams, {"from": self.account, "to": check.to, "data": check.data}), "latest")
        return int.from_bytes(bytes(raw)[:32] or b"\0", "big") != 0

    def _receipt(self, tx_hash: str) -> TxReceipt | None:
        try:
            return self.w3.eth.get_transaction_receipt(HexStr(tx_hash))
        except TransactionNotFound:
            return None

    def _in_mempool(self, tx_hash: str) -> bool:
        try:
            self.w3.eth.get_transaction(HexStr(tx_hash))
            return True
        except TransactionNotFound:
            return False

    def _revert_reason(self, call: PlannedCall, receipt: TxReceipt) -> str:
        """Out of gas when the receipt used the whole limit; otherwise replay the call on the parent block to
        recover the revert reason (best effort)."""
        try:
            limit = self.w3.eth.get_transaction(receipt["transactionHash"])["gas"]
        except Exception:  # diagnostics only
            limit = None
        if limit is not None and receipt["gasUsed"] >= limit:
            return f"ran out of gas (used all {limit:,} of its limit)"
        params = {"from": self.account, "to": call.to, "data": call.data, "value": call.value}
        try:
            self.w3.eth.call(cast(TxParams, params), max(receipt["blockNumber"] - 1, 0))
        except ContractLogicError as e:
            return decode_revert(e.data) or e.message or "reverted"
        except Exception as e:  # the replay is diagnostics only
            return f"reverted (reason unavailable: {type(e).__name__})"
        return "reverted (replay on the parent block succeeded; state changed within the block)"
