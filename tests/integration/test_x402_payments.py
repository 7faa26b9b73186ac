"""The golem pays for its thinking with x402 on real Anvil: the router's call goes to the paid gateway (in-process
ASGI), which answers 402, takes the golem's EIP-3009 authorization, verifies and settles it through the x402 SDK's
facilitator on chain, and forwards to the model (faked at the HTTP boundary). Refusals: a replayed or tampered
authorization (facilitator), a quote above the cap (golem). A call whose answer was lost after settlement is paid once
when retried."""

from __future__ import annotations

import base64
import json

import httpx2
import pytest

from golem.chain.contracts import at
from golem.deliberators import Wallet, select_deliberator
from golem.inference.config import InferenceConfig
from golem.inference.payment import BudgetRefusal, PaymentJournal, payment_scope
from golem.inference.router import InferenceRetryable, RoutePlan
from golem.models.config import GolemConfig
from golem.models.enums import Tier
from infra.anvil import ANVIL_ADDRESSES, ANVIL_KEYS
from infra.x402_gateway import Gateway, GatewayConfig, quote_amount
from tests.unit.inference_fakes import FakeMessagesAPI, decide, message

pytestmark = pytest.mark.integration

GOLEM_KEY, GOLEM = ANVIL_KEYS[2], ANVIL_ADDRESSES[2]
PAY_TO, FACILITATOR_KEY = ANVIL_ADDRESSES[4], ANVIL_KEYS[5]
SYSTEM = [{"type": "text", "text": "You are a DeFi agent."}]
MESSAGES = [{"role": "user", "content": [{"type": "text", "text": "Health factor 2.1, ETH flat. Decide."}]}]


async def answer(body):
    return message([decide("nothing to do", 0.7, False)], model=body["model"], input_tokens=900, output_tokens=80)


class Rig:
    def __init__(self, w3, world, tmp_path, *, cap: float = 0.25, replies=None, drop_first_paid: bool = False,
                 die_before_paying: bool = False, timeout_s: int = 300):
        self.w3, self.usdc = w3, at(w3, world.address("USDC"), "FiatToken")
        self.api = FakeMessagesAPI(*(replies or [answer] * 4))
        self.gateway = Gateway(GatewayConfig(
            rpc_url=w3.provider.endpoint_uri, asset=self.usdc.address, pay_to=PAY_TO, facilitator_key=FACILITATOR_KEY,
            upstream_url="http://upstream.test", prices=dict(InferenceConfig().prices),
            store_path=tmp_path / "gateway.sqlite", max_timeout_seconds=timeout_s),
            upstream=httpx2.MockTransport(self.api.handler))
        self.audit: list[tuple[dict, str | None]] = []
        inner = httpx2.ASGITransport(app=self.gateway)
        self.to_gateway: httpx2.AsyncBaseTransport = (_DropFirstPaidAnswer(inner) if drop_first_paid else
                                                      _DieBeforeFirstPayment(inner) if die_before_paying else inner)
        config = GolemConfig.model_validate({"inference": {"provider": "anthropic", "payment": "x402",
                                                           "max_payment_usd": cap,
                                                           "gateway_url": "http://gateway.test"}})
        self.journal_path = tmp_path / "x402_payments.sqlite"
        wallet = Wallet(private_key=GOLEM_KEY, w3=w3, asset=self.usdc.address, journal_path=self.journal_path,
                        on_paid=lambda rec, scope: self.audit.append((rec.model_dump(), scope)))
        self.deliberator, self.why = select_deliberator(config, {}, home=tmp_path, data_dir=tmp_path, wallet=wallet,
                                                        transport=self.to_gateway)
        self.router = self.deliberator.router

    def balances(self) -> tuple[int, int]:
        return (self.usdc.functions.balanceOf(GOLEM).call(), self.usdc.functions.balanceOf(PAY_TO).call())

    def plan(self, model="claude-sonnet-4-6") -> RoutePlan:
        return RoutePlan(tier=Tier.T2, model=model, max_tokens=1500, estimate_usd=0.03, daily_spend=0.0)

    async def call(self, model="claude-sonnet-4-6"):
        return await self.router.complete(self.plan(model), system=SYSTEM, messages=MESSAGES)


class _DieBeforeFirstPayment(httpx2.AsyncBaseTransport):
    """The worker dies after signing (the authorization is journaled) and before the payment leaves."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self.inner, self.died = inner, 0

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if "payment-signature" in request.headers and not self.died:
            self.died += 1
            raise httpx2.ConnectError("the worker died before sending the payment", request=request)
        return await self.inner.handle_async_request(request)


class _DropFirstPaidAnswer(httpx2.AsyncBaseTransport):
    """The worker dies after its payment went out and the gateway settled it, before the answer arrives."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self.inner, self.dropped = inner, 0

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        if "payment-signature" in request.headers and response.status_code == 200 and not self.dropped:
            self.dropped += 1
            raise httpx2.ReadError("connection lost after the gateway answered", request=request)
        return response


def _quote(rig: Rig) -> int:
    return quote_amount({"model": "claude-sonnet-4-6", "max_tokens": 1500, "system": SYSTEM, "messages": MESSAGES},
                        rig.gateway.cfg.prices, 1.0)


async def test_a_paid_call_moves_usdc_on_chain_and_gets_its_answer(w3, world_snapshot, tmp_path):
    rig = Rig(w3, world_snapshot, tmp_path)
    assert rig.why.startswith("anthropic via x402"), rig.why
    golem_before, gateway_before = rig.balances()
    with payment_scope("golem-a/run-1/decide-7") as scope:
        completion = await rig.call()
    price = _quote(rig)
    assert rig.balances() == (golem_before - price, gateway_before + price)
    assert completion.message.content[0].name == "decide", "the model's answer came through the gateway"
    assert completion.before_provider_request == ["x402-payment"]
    [paid] = completion.payments
    assert scope.payments == [paid] and paid.amount == price and paid.pay_to == PAY_TO
    assert completion.cost == pytest.approx(price / 1e6), "the call's cost is what left the wallet"
    assert rig.usdc.functions.authorizationState(GOLEM, bytes.fromhex(paid.nonce[2:])).call() is True
    receipt = w3.eth.get_transaction_receipt(paid.settlement_tx)
    assert receipt.status == 1 and receipt["to"] == rig.usdc.address
    assert rig.audit == [(paid.model_dump(), "golem-a/run-1/decide-7")]
    assert rig.api.headers[0].get("x-api-key") != "x402-wallet-pays", "the golem sends no provider key upstream"
    journal = PaymentJournal(rig.journal_path).all()
    assert [(r["nonce"], r["settlement_tx"]) for r in journal] == [(paid.nonce, paid.settlement_tx)]
    assert GOLEM_KEY[2:] not in json.dumps(journal) and GOLEM_KEY[2:] not in json.dumps(rig.audit)


async def test_a_replayed_or_tampered_authorization_is_refused(w3, world_snapshot, tmp_path):
    rig = Rig(w3, world_snapshot, tmp_path)
    with payment_scope("golem-a/run-1/decide-8"):
        await rig.call()
    [row] = PaymentJournal(rig.journal_path).all()
    payload = json.loads(base64.b64decode(row["header"]))
    body = json.dumps({"model": "claude-sonnet-4-6", "max_tokens": 1500, "system": SYSTEM,
                       "messages": [{"role": "user", "content": "another question"}]}).encode()

    async def present(p: dict, body: bytes) -> tuple[int, str]:
        status, headers, out = await rig.gateway.handle(
            "POST", "/v1/messages", {"payment-signature": base64.b64encode(json.dumps(p).encode()).decode()}, body)
        return status, json.loads(out).get("error", "")

    # the same authorization for another request: the gateway knows it paid for the first one only
    assert await present(payload, body) == (402, "this authorization paid for another request")
    # replayed to a gateway that never saw it (a fresh store): the facilitator finds the nonce used on chain
    fresh = Gateway(GatewayConfig(rpc_url=rig.gateway.cfg.rpc_url, asset=rig.usdc.address, pay_to=PAY_TO,
                                  facilitator_key=FACILITATOR_KEY, upstream_url="http://upstream.test",
                                  prices=rig.gateway.cfg.prices), upstream=httpx2.MockTransport(rig.api.handler))
    first = json.dumps({"model": "claude-sonnet-4-6", "max_tokens": 1500, "system": SYSTEM,
                        "messages": MESSAGES}).encode()
    status, headers, out = await fresh.handle("POST", "/v1/messages", {"payment-signature": row["header"]}, first)
    assert (status, json.loads(out)["error"]) == (402, "invalid_exact_evm_nonce_already_used")
    # tampered: the nonce changed after signing (the signature no longer matches the authorization)
    tampered = json.loads(json.dumps(payload))
    tampered["payload"]["authorization"]["nonce"] = "0x" + "11" * 32
    status, headers, out = await fresh.handle(
        "POST", "/v1/messages", {"payment-signature": base64.b64encode(json.dumps(tampered).encode()).decode()}, first)
    assert status == 402 and "signature" in json.loads(out)["error"]
    assert len(rig.api.requests) == 1, "no refused payment reached the model"


async def test_a_quote_above_the_cap_is_refused_by_the_golem(w3, world_snapshot, tmp_path):
    rig = Rig(w3, world_snapshot, tmp_path, cap=0.001)
    before = rig.balances()
    with payment_scope("golem-a/run-1/decide-9"), pytest.raises(BudgetRefusal, match="above \\[inference\\] max_payment"):
        await rig.call()
    assert rig.balances() == before and rig.api.requests == [] and PaymentJournal(rig.journal_path).all() == []


async def test_a_golem_that_cannot_pay_says_so_and_does_not_sign(w3, world_snapshot, tmp_path):
    from golem.world.deploy import TxSender

    rig = Rig(w3, world_snapshot, tmp_path)
    held = rig.usdc.functions.balanceOf(GOLEM).call()
    sender = TxSender.for_key(w3, GOLEM_KEY)  # the wallet is emptied but for a cent
    w3.eth.wait_for_transaction_receipt(sender.call_fn(rig.usdc, "transfer", ANVIL_ADDRESSES[3], held - 10_000))
    with payment_scope("golem-a/run-1/decide-11"), pytest.raises(BudgetRefusal, match="cannot pay for this thought"):
        await rig.call()
    assert rig.api.requests == [] and PaymentJournal(rig.journal_path).all() == []


async def test_a_lost_answer_after_settlement_is_paid_once_on_retry(w3, world_snapshot, tmp_path):
    rig = Rig(w3, world_snapshot, tmp_path, drop_first_paid=True)
    before = rig.balances()
    with payment_scope("golem-a/run-1/decide-10"), pytest.raises(InferenceRetryable):
        await rig.call()
    price = _quote(rig)
    assert rig.balances() == (before[0] - price, before[1] + price), "the gateway settled before the answer was lost"
    with payment_scope("golem-a/run-1/decide-10"):  # the activity's retry: same workflow run and activity id
        completion = await rig.call()
    assert completion.message.content[0].name == "decide"
    assert rig.balances() == (before[0] - price, before[1] + price), "paid once"
    assert len(rig.api.requests) == 1, "the gateway answered the retry from its store, not the model again"
    [paid] = completion.payments
    assert paid.reused and paid.settlement_tx


async def test_a_t2_tick_pays_the_gateway_from_the_golems_wallet(temporal_client, tmp_path):
    """On real Temporal: the steered T2 tick's decide pays on chain and gets its answer; the first paid answer is
    lost after settlement (the worker's connection dies), Temporal retries decide, and the call is paid once."""
    from golem.life.cycle_store import CycleStore
    from tests.integration.golem_rig import GOLEM_KEY as RIG_KEY, in_process_worker, make_rig, wait_for, wait_for_record
    from tests.unit.inference_fakes import tool_use
    from workflows.golem import GolemWorkflow

    rig = make_rig(tmp_path, "x402-golem", "calm", theta=0.25,
                   inference={"provider": "anthropic", "payment": "x402", "gateway_url": "http://gateway.test"})
    try:
        async def reply(body):
            tools = {t["name"] for t in body.get("tools", [])}
            if "evaluate" in tools:
                return message([tool_use("evaluate", {"verdict": "good", "score": 0.6, "rationale": "held"})],
                               model=body["model"], input_tokens=300, output_tokens=40)
            if "reflect" in tools:
                return message([tool_use("reflect", {"insight": "Holding cost nothing."})], model=body["model"],
                               input_tokens=300, output_tokens=30)
            return message([decide("owner asked to hold; nothing to do", 0.7, False, decision="hold")],
                           model=body["model"], input_tokens=1800, output_tokens=90)

        api = FakeMessagesAPI(*([reply] * 12))
        usdc = at(rig.w3, rig.deployment.address("USDC"), "ERC20")
        gateway = Gateway(GatewayConfig(
            rpc_url=rig.anvil.rpc_url, asset=usdc.address, pay_to=PAY_TO, facilitator_key=FACILITATOR_KEY,
            upstream_url="http://upstream.test", prices=dict(InferenceConfig().prices),
            store_path=tmp_path / "gateway.sqlite"), upstream=httpx2.MockTransport(api.handler))
        services = rig.services()
        dropper = _DropFirstPaidAnswer(httpx2.ASGITransport(app=gateway))
        deliberator, why = select_deliberator(rig.config, {}, home=rig.home, data_dir=rig.data_dir,
                                              wallet=services.wallet(RIG_KEY), transport=dropper)
        services.use_deliberator(deliberator, why)
        golem_before, gateway_before = (usdc.functions.balanceOf(a).call() for a in (GOLEM, PAY_TO))
        store = CycleStore(rig.data_dir)
        rig.start_market(interval=0.25)
        async with in_process_worker(temporal_client, rig, services=services):
            handle = await rig.start_golem(temporal_client, max_ticks=None)
            await wait_for(lambda: store.count() >= 2, 60, "two ticks")
            await handle.signal(GolemWorkflow.steer, {"id": "pay-1", "message": "hold", "severity": "high"})
            rec = await wait_for_record(
                store, lambda rec: any(i.id == "pay-1" for i in rec.active_interventions), "the steered tick",
                timeout=90)
            await handle.terminate("test done")
        trail = [e.payload for e in services.safety.audit.entries(kind_prefix="x402.payment")]
        golem_after, gateway_after = (usdc.functions.balanceOf(a).call() for a in (GOLEM, PAY_TO))
    finally:
        rig.stop()

    assert rec.tier == Tier.T2 and dropper.dropped == 1
    d = rec.deliberation
    assert d.model == "claude-sonnet-4-6" and d.decision.startswith("hold"), d.reasoning_summary
    assert d.before_provider_request == ["x402-payment"]
    [paid] = d.payments
    assert paid.reused and paid.settlement_tx and paid.pay_to == PAY_TO
    assert d.cost == pytest.approx(paid.price_usd) and rec.inference_cost >= d.cost
    decide_calls = [b for b in api.requests if "decide" in {t["name"] for t in b.get("tools", [])}]
    assert len(decide_calls) == 1, "the retry was answered from the gateway's store: one model call, one payment"
    assert paid.nonce in [p["nonce"] for p in trail]
    # every paid call of the tick (decide, and the evaluator's and Reflexion's if they ran) left the wallet once
    spent = sum(p["amount"] for p in trail)
    assert (golem_before - golem_after, gateway_after - gateway_before) == (spent, spent)
    # the economic clock: the paid price is part of the tick's burn, and the runway reads the wallet over it
    assert rec.credit_consumed >= paid.price_usd and rec.estimated_ttl_ticks is not None
    assert RIG_KEY[2:] not in (rig.data_dir / "cycles" / f"cycle-{rec.tick:06d}.json").read_text()


def test_golem_run_starts_the_gateway_as_a_supervised_child(tmp_path):
    """`golem run`'s child for payment = "x402": the gateway process serves 402 quotes in the world's USDC on this
    chain at gateway_url (and payment = "none" starts none)."""
    import time as _time

    from golem.models.config import load_config
    from infra.anvil import free_port
    from infra.stack import gateway_child
    from tests.integration.golem_rig import make_rig

    port = free_port()
    rig = make_rig(tmp_path, "x402-run", inference={"provider": "anthropic", "payment": "x402",
                                                    "gateway_url": f"http://127.0.0.1:{port}"})
    (rig.data_dir / "logs").mkdir(exist_ok=True)
    child = gateway_child(rig.config, rig.home, rig.data_dir)
    try:
        assert child is not None and child.name == "x402-gateway"
        child.start()
        deadline, health = _time.monotonic() + 60, None
        while _time.monotonic() < deadline and child.exit_code() is None:
            try:
                health = httpx2.get(f"http://127.0.0.1:{port}/x402/health", timeout=2).json()
                break
            except httpx2.HTTPError:
                _time.sleep(0.3)
        assert health is not None, (rig.data_dir / "logs" / "x402-gateway.log").read_text()[-2000:]
        assert health["asset"] == rig.deployment.address("USDC") and health["network"] == f"eip155:{rig.w3.eth.chain_id}"
        r = httpx2.post(f"http://127.0.0.1:{port}/v1/messages", json={
            "model": "claude-haiku-4-5", "max_tokens": 200, "messages": MESSAGES}, timeout=10)
        assert r.status_code == 402 and r.json()["accepts"][0]["payTo"] == PAY_TO
        assert int(r.json()["accepts"][0]["amount"]) > 0 and "payment-required" in r.headers
    finally:
        if child is not None:
            child.stop()
        rig.stop()
    unpaid = load_config(rig.home / "golem.toml").model_copy(deep=True)
    unpaid.inference.payment = "none"
    assert gateway_child(unpaid, rig.home, rig.data_dir) is None


@pytest.mark.parametrize("cap, thinker", [(0.02, "claude-haiku-4-5"), (0.001, "offline-deliberator")])
async def test_a_refused_t2_quote_falls_back_to_the_cheaper_tier_then_offline(w3, world_snapshot, tmp_path, cap, thinker):
    """The deliberator under a cap between Haiku's and Sonnet's quotes thinks with Haiku (paid); under a cap below
    both, the offline deliberator answers and the record says why. Neither fails."""
    from tests.unit.test_offline_deliberator import EXAMPLE, decide_input

    rig = Rig(w3, world_snapshot, tmp_path, cap=cap)
    before = rig.balances()
    with payment_scope("golem-a/run-1/decide-12"):
        d = await rig.deliberator.decide(decide_input(tier=Tier.T2), EXAMPLE, "")
    r = d.record
    assert r.model == thinker and r.tier == Tier.T2, r.reasoning_summary
    assert "above [inference] max_payment_usd" in r.reasoning_summary
    if thinker == "claude-haiku-4-5":
        assert "the cheaper claude-haiku-4-5 thought instead" in r.reasoning_summary
        [paid] = r.payments
        assert paid.model == "claude-haiku-4-5" and paid.price_usd <= cap and r.cost == pytest.approx(paid.price_usd)
        assert rig.balances() == (before[0] - paid.amount, before[1] + paid.amount)
        assert [b["model"] for b in rig.api.requests] == ["claude-haiku-4-5"]
    else:
        assert r.reasoning_summary.startswith("LLM not called (x402: ") and r.payments == [] and r.cost == 0.0
        assert rig.balances() == before and rig.api.requests == []


async def test_a_worker_killed_after_signing_pays_once_even_after_its_authorization_expired(w3, world_snapshot,
                                                                                           tmp_path):
    """Signed and journaled, never sent; the retry comes after the authorization's window closed: it is signed again
    under the same nonce (so at most one could settle) and paid once."""
    import asyncio

    rig = Rig(w3, world_snapshot, tmp_path, die_before_paying=True, timeout_s=8)
    before = rig.balances()
    with payment_scope("golem-a/run-1/decide-13"), pytest.raises(InferenceRetryable):
        await rig.call()
    [first] = PaymentJournal(rig.journal_path).all()
    assert rig.balances() == before and first["settlement_tx"] is None
    await asyncio.sleep(3.5)  # 8 s window, the facilitator wants 6 s of it left: this one can no longer settle
    with payment_scope("golem-a/run-1/decide-13"):
        completion = await rig.call()
    [paid] = completion.payments
    [row] = PaymentJournal(rig.journal_path).all()
    assert paid.reused and row["nonce"] == first["nonce"] == paid.nonce and row["header"] != first["header"]
    assert rig.balances() == (before[0] - paid.amount, before[1] + paid.amount), "paid once"
