"""STRATEGY.md MUST constraints as hard checks.

`must_gate(strategy, snapshot)` runs before any LLM call: breached `MUST keep` lines escalate to T2 and enter the
prompt as facts, `MUST NOT <tool>` withholds the tool. `Book` + `constraint_refusal` check one proposed action on
the state the simulation predicts, whatever the LLM wrote. One grammar for both (golem.inference.strategy).
See docs/design/safety.md#must-constraints.
"""

from __future__ import annotations

import operator

from pydantic import BaseModel, Field

from golem.chain.tools.schemas import COLLATERAL_TOKEN, DEBT_TOKEN, LP_SHARES_KEY, POOL_TOKEN0
from golem.inference.strategy import Constraint, Strategy
from golem.models.observation import ChainSnapshot
from golem.models.tick import ProposedAction

_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
        "!=": operator.ne}
# The position's liquidation threshold when the snapshot does not carry Aave's (no collateral yet, or a
# hand-built snapshot): the embedded market's WETH reserve, 82.5 % (golem.world.deploy.RESERVES).
# Kept as a number here, not imported: the safety layer must not depend on the dev world's deploy script
# (tests/unit/test_safety_liquidity.py checks the two agree).
FALLBACK_LIQUIDATION_THRESHOLD = 0.825
_ACCOUNT_METRICS = ("health_factor", "debt", "collateral")
# `SHOULD NOT <tool>` (no amount): the action is sized to this share of what was proposed; a SHOULD weighs, never
# forbids (docs/design/strategies.md)
SHOULD_NOT_FACTOR = 0.5


class MustGate(BaseModel):
    breached: list[str] = Field(default_factory=list)  # "line 12 `MUST keep health_factor >= 1.3`: is 1.21"
    forbidden_tools: list[str] = Field(default_factory=list)
    withheld: dict[str, str] = Field(default_factory=dict)  # tools a MAY line of an inactive strategy names → why

    @property
    def force_t2(self) -> bool:
        return bool(self.breached)


class Book(BaseModel):
    """The account as the checks expect it: starts at the observation, moves by each approved
    action's simulated deltas."""

    balances: dict[str, float]
    collateral: float
    debt: float
    oracle_price: float
    world: dict[str, float | None] = Field(default_factory=dict)  # price, gas_gwei, ...
    used: dict[str, float] = Field(default_factory=dict)  # "swap:WETH" → amount this tick
    start_balances: dict[str, float] = Field(default_factory=dict)
    start_collateral: float = 0.0
    start_debt: float = 0.0
    lp_shares_delta: float = 0.0  # pool shares moved by the approved actions so far (delta:lp_shares)
    # Aave's (weighted) liquidation threshold of the position, from getUserAccountData
    liquidation_threshold: float = FALLBACK_LIQUIDATION_THRESHOLD

    @classmethod
    def of(cls, snap: ChainSnapshot) -> "Book":
        lend = [p for p in snap.positions if p.kind == "lending"]
        coll, debt = sum(p.collateral for p in lend), sum(p.debt for p in lend)
        lts = [p.liquidation_threshold for p in lend if p.liquidation_threshold]
        lt = lts[0] if lts else FALLBACK_LIQUIDATION_THRESHOLD
        eth = snap.oracle_price if snap.oracle_price > 0 else snap.pool.price
        gap = (snap.pool.price - snap.oracle_price) / snap.oracle_price * 1e4 if snap.oracle_price > 0 else None
        bal = {k.upper(): v for k, v in snap.balances.items()}
        return cls(
            balances=bal, collateral=coll, debt=debt, oracle_price=eth,
            world={"price": snap.pool.price, "oracle_price": snap.oracle_price, "gas_gwei": snap.gas_price_gwei,
                   "pool_oracle_gap_bps": gap},
            start_balances=dict(bal), start_collateral=coll, start_debt=debt, liquidation_threshold=lt,
        )  # fmt: skip

    @property
    def health_factor(self) -> float | None:
        """Aave's formula for a WETH-collateral / USDC-debt position: collateral × price × LT / debt
        (USDC at $1, as its feed answers), so at the observation it equals getUserAccountData's."""
        if self.debt <= 1e-12:
            return None
        return self.collateral * self.oracle_price * self.liquidation_threshold / self.debt

    def metric(self, name: str) -> float | None:
        if name == "health_factor":
            return self.health_factor
        if name == "debt":
            return self.debt
        if name == "collateral":
            return self.collateral
        if name.startswith("balance."):
            return self.balances.get(name.split(".", 1)[1].upper(), 0.0)
        return self.world.get(name)

    def after(self, expected: dict[str, float]) -> "Book":
        """The book moved by a simulation's expected deltas (`delta:<SYM>`, `delta:collateral|debt|lp_shares`)."""
        nxt = self.model_copy(deep=True)
        for k, v in expected.items():
            if not k.startswith("delta:"):
                continue
            name = k.split(":", 1)[1]
            if name == "collateral":
                nxt.collateral += v
            elif name == "debt":
                nxt.debt += v
            elif name == LP_SHARES_KEY:
                nxt.lp_shares_delta += v
            else:
                nxt.balances[name.upper()] = nxt.balances.get(name.upper(), 0.0) + v
        return nxt


def _fmt(v: float | None) -> str:
    return "none (no debt)" if v is None else f"{v:,.6g}"


def _kept(c: Constraint, value: float | None) -> bool:
    if value is None:
        # health_factor with no debt is infinite: every lower bound holds, no upper bound does.
        return c.metric == "health_factor" and c.op in (">", ">=", "!=")
    return bool(_OPS[c.op or ">="](value, float(c.value or 0.0)))


def must_gate(strategy: Strategy, snap: ChainSnapshot) -> MustGate:
    """Before any LLM call: breached `MUST keep` lines and tools `MUST NOT <tool>` forbids."""
    book = Book.of(snap)
    gate = MustGate(withheld=dict(strategy.may_gated))
    for c in strategy.constraints:
        if c.kind == "forbid" and c.tool and c.tool not in gate.forbidden_tools:
            gate.forbidden_tools.append(c.tool)
        elif c.kind == "keep" and c.metric:
            value = book.metric(c.metric)
            if value is None and c.metric not in ("health_factor",):
                continue  # a metric we cannot read here is not a breach
            if not _kept(c, value):
                gate.breached.append(f"{'' if c.source == 'STRATEGY.md' else c.source + ' '}line {c.line} `{c.text}`: "
                                     f"is {_fmt(value)}")
    return gate


def _token_of(action: ProposedAction) -> str:
    if action.tool == "swap":
        return str(action.arguments.get("token_in", "")).upper()
    if action.tool == "add_liquidity":
        return POOL_TOKEN0  # caps on a deposit count its WETH side
    if action.tool == "remove_liquidity":
        return "LP"
    return COLLATERAL_TOKEN if action.tool in ("supply", "withdraw") else DEBT_TOKEN


_AMOUNT_ARG = {"swap": "amount_in", "add_liquidity": "amount_weth", "remove_liquidity": "fraction"}


def _amount_of(action: ProposedAction) -> float:
    raw = action.arguments.get(_AMOUNT_ARG.get(action.tool, "amount"), 0)
    try:
        return float(raw)
    except (TypeError, ValueError):
        return 0.0


def _basis(tool: str, token: str, book: Book) -> float:
    if tool in ("swap", "supply"):
        return book.start_balances.get(token, 0.0)
    if tool == "withdraw":
        return book.start_collateral
    return book.start_debt


def constraint_refusal(
    strategy: Strategy, action: ProposedAction, before: Book, after: Book, opens_exposure: bool
) -> str | None:
    """The first MUST line the action would break (on the simulated post-state), or None; a tool a MAY line of an
    inactive strategy names is refused too (docs/design/strategies.md)."""
    tool, token, amount = action.tool, _token_of(action), _amount_of(action)
    if tool in strategy.may_gated:
        return f"MAY: {strategy.may_gated[tool]}"
    for c in strategy.constraints:
        why = f"MUST ({c.source} line {c.line}: `{c.text}`)"
        if c.kind == "forbid" and c.tool == tool:
            return f"{why} forbids {tool}"
        if c.kind == "cap" and c.tool == tool and (c.token is None or c.token == token) and c.amount:
            cap = c.amount.value / 100.0 * _basis(tool, token, before) if c.amount.percent else c.amount.value
            used = before.used.get(f"{tool}:{token}", 0.0)
            if used + amount > cap * (1 + 1e-9) + 1e-12:
                return f"{why}: {tool} of {amount:,.6g} {token} (+{used:,.6g} earlier this tick) exceeds the cap {cap:,.6g}"
        if c.kind == "keep" and c.metric:
            was, now = before.metric(c.metric), after.metric(c.metric)
            if c.metric.startswith("balance.") or c.metric in _ACCOUNT_METRICS:
                # An action may not move an account metric into breach, nor deeper into one.
                if not _kept(c, now) and (_kept(c, was) or _worse(c, was, now)):
                    return f"{why}: {c.metric} would be {_fmt(now)} after {tool} (now {_fmt(was)})"
            elif was is not None and not _kept(c, was) and opens_exposure:
                return f"{why}: {c.metric} is {_fmt(was)}; no new exposure while it is breached"
    return None


def _worse(c: Constraint, was: float | None, now: float | None) -> bool:
    if c.metric == "health_factor":
        if now is None:
            return False
        return was is None or now < was - 1e-12
    if was is None or now is None:
        return False
    if c.op in (">", ">="):
        return now < was - 1e-12
    if c.op in ("<", "<="):
        return now > was + 1e-12
    return now != was


def mark_used(book: Book, action: ProposedAction) -> None:
    key = f"{action.tool}:{_token_of(action)}"
    book.used[key] = book.used.get(key, 0.0) + _amount_of(action)


def constraint_caps(strategy: Strategy, action: ProposedAction, book: Book,
                    should: bool = False) -> list[tuple[float, str]]:
    """(the most of `action` each MUST line allows, the line in words) — for the lines a size can satisfy: a cap
    (`MUST NOT swap more than 30% WETH`) and a keep line the action moves toward its bound (health factor for
    borrow/withdraw, a balance the action spends, debt for borrow, collateral for withdraw). A line no size can
    satisfy (`MUST NOT borrow`) gives no cap: constraint_refusal refuses it whole."""
    tool, token = action.tool, _token_of(action)
    out: list[tuple[float, str]] = []
    for c in (strategy.should if should else strategy.constraints):  # `should`: the same caps from SHOULD lines
        why = f"{c.level.upper()} ({c.source} line {c.line}: `{c.text}`)"
        if should and c.kind == "forbid" and c.tool == tool:  # SHOULD NOT <tool>: weighs it down by half
            out.append((_amount_of(action) * SHOULD_NOT_FACTOR, why))
            continue
        if c.kind == "cap" and c.tool == tool and (c.token is None or c.token == token) and c.amount:
            cap = c.amount.value / 100.0 * _basis(tool, token, book) if c.amount.percent else c.amount.value
            out.append((cap - book.used.get(f"{tool}:{token}", 0.0), why))
            continue
        if c.kind != "keep" or not c.metric:
            continue  # a line already breached gives a cap below zero: no size of the action fits
        x, op = float(c.value or 0.0), c.op or ">="
        strict = 1e-6 if op in (">", "<") else 0.0
        lower, upper = op in (">=", ">"), op in ("<=", "<")
        price_lt = book.oracle_price * book.liquidation_threshold
        if c.metric == "health_factor" and lower and tool == "borrow" and x > 0:
            out.append((book.collateral * price_lt / x - book.debt - strict, why))
        elif c.metric == "health_factor" and lower and tool == "withdraw" and book.debt > 1e-12 and price_lt > 0:
            out.append((book.collateral - x * book.debt / price_lt - strict, why))
        elif (c.metric.startswith("balance.") and lower and tool in ("swap", "supply", "repay")
              and c.metric.split(".", 1)[1].upper() == token):
            out.append((book.balances.get(token, 0.0) - x - strict, why))
        elif c.metric == "debt" and upper and tool == "borrow":
            out.append((x - book.debt - strict, why))
        elif c.metric == "collateral" and lower and tool == "withdraw":
            out.append((book.collateral - x - strict, why))
    return out
