"""The extension registry: each extension a small class naming its layer (0–7), the hooks it serves and what it
depends on. `build()` is the start-up check: every dependency registered, none in a higher layer, no cycle, each
hook's firing order the declared one (SPEC_ORDER), and only optional extensions switched off (`[extensions]
disabled`); a violation is a RegistryError naming both sides. `builtin_extensions()` is this build, with `present`
and `where` per extension so `golem extensions` prints an honest matrix. See docs/design/life.md#extensions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any
from dataclasses import dataclass, field

# the 20 hooks (session has three moments: start, before_compact, before_branch).
HOOKS: tuple[str, ...] = (
    "session", "input", "before_agent_start", "agent_start", "turn_start", "context", "before_provider_request",
    "tool_call", "tool_execution_start", "tool_execution_update", "tool_execution_end", "tool_result", "turn_end",
    "agent_end", "after_turn", "system_prompt", "send_message", "steer", "debug", "error", "on_end",
)

# extensions per hook, in firing order. The matrix is the authority:
# The per-extension list also names provider-adapter and grimoire under before_agent_start and audit under
# tool_call and after_turn, which the matrix leaves out; here those run inside the matrix's members (the audit
# trail is written by the tool_call chain's telemetry position, see golem.safety.cage.validate_layered).
SPEC_ORDER: dict[str, tuple[str, ...]] = {
    "session": ("grimoire", "heartbeat", "compaction", "audit"),  # start: grimoire → heartbeat; before_compact
    "input": ("input-router",),
    "before_agent_start": ("tools", "context", "compiler", "model-router", "safety"),
    "agent_start": ("ui-bridge",),
    "turn_start": ("ui-bridge",),
    "context": ("turn-context",),
    "before_provider_request": ("x402-payment",),
    "tool_call": ("telemetry", "safety", "risk", "permits", "coordination"),
    "tool_execution_start": ("ui-bridge",),
    "tool_execution_update": ("ui-bridge",),
    "tool_execution_end": ("ui-bridge",),
    "tool_result": ("result-filter",),
    "turn_end": ("ui-bridge",),
    "agent_end": ("ui-bridge",),
    "after_turn": ("heartbeat", "lifespan", "daimon", "memory", "risk", "dream", "cybernetics", "clade", "telemetry"),
    "system_prompt": ("playbook",),
    "send_message": ("intervention",),
    "steer": ("intervention",),
    "debug": ("observability",),
    "error": ("observability",),
    "on_end": ("lifespan",),
}


class RegistryError(ValueError):
    """A start-up error of the extension registry; the message names both sides of the violation."""


@dataclass(frozen=True)
class Extension:
    name: str
    layer: int  # 0 foundation … 7 recovery
    hooks: frozenset[str]
    depends_on: tuple[str, ...] = ()
    optional: bool = False  # may be switched off in golem.toml
    present: bool = True  # this build has it
    what: str = ""
    where: dict[str, str] = field(default_factory=dict)  # hook → the code that serves it in this build

    def __post_init__(self) -> None:
        if not 0 <= self.layer <= 7:
            raise RegistryError(f"extension {self.name!r}: layer {self.layer} is not in 0..7")
        unknown = sorted(set(self.hooks) - set(HOOKS))
        if unknown:
            raise RegistryError(f"extension {self.name!r}: unknown hook(s) {', '.join(unknown)} (hooks: {', '.join(HOOKS)})")


class ExtensionRegistry:
    def __init__(self) -> None:
        self._exts: dict[str, Extension] = {}
        self._disabled: set[str] = set()
        self._orders: dict[str, list[str]] = {}
        self._handlers: dict[tuple[str, str], Callable[..., Any]] = {}
        self.built = False

    def register(self, ext: Extension) -> None:
        if ext.name in self._exts:
            raise RegistryError(f"extension {ext.name!r} is registered twice")
        self._exts[ext.name] = ext
        self.built = False

    def extensions(self) -> list[Extension]:
        return sorted(self._exts.values(), key=lambda e: (e.layer, e.name))

    def get(self, name: str) -> Extension:
        return self._exts[name]

    def disabled(self) -> set[str]:
        return set(self._disabled)

    def active(self, name: str) -> bool:
        e = self._exts.get(name)
        return e is not None and e.present and name not in self._disabled

    def build(self, disabled: Iterable[str] = ()) -> "ExtensionRegistry":
        """Validate and compute every hook's firing order; RegistryError on the first violation."""
        disabled = set(disabled)
        for name in sorted(disabled):
            ext = self._exts.get(name)
            if ext is None:
                raise RegistryError(f"[extensions] disabled names {name!r}, which is not an extension of this build "
                                    f"(extensions: {', '.join(sorted(self._exts))})")
            if not ext.optional:
                raise RegistryError(f"[extensions] disabled: {name!r} (layer {ext.layer}) is not optional; only "
                                    f"{', '.join(e.name for e in self.extensions() if e.optional)} may be switched off")
        live = {n: e for n, e in self._exts.items() if e.present and n not in disabled}
        for ext in self.extensions():
            for dep in ext.depends_on:
                target = self._exts.get(dep)
                if target is None:
                    raise RegistryError(f"extension {ext.name!r} (layer {ext.layer}) depends on {dep!r}, which is not "
                                        f"registered (registered: {', '.join(sorted(self._exts))})")
                if target.layer > ext.layer:
                    raise RegistryError(f"extension {ext.name!r} (layer {ext.layer}) depends on {dep!r} (layer "
                                        f"{target.layer}): dependencies must be in an equal or lower layer")
                if ext.name in live and dep not in live:
                    why = "switched off in golem.toml" if dep in disabled else "not in this build"
                    raise RegistryError(f"extension {ext.name!r} (layer {ext.layer}) depends on {dep!r} (layer "
                                        f"{target.layer}), which is {why}")
        self._check_cycles()
        orders: dict[str, list[str]] = {}
        for hook in HOOKS:
            spec = SPEC_ORDER.get(hook, ())
            for ext in self.extensions():
                if hook in ext.hooks and ext.name not in spec:
                    raise RegistryError(f"extension {ext.name!r} (layer {ext.layer}) serves {hook}, but the declared "
                                        f"{hook} order ({' -> '.join(spec) or 'empty'}) has no place for it")
            orders[hook] = [n for n in spec if n in live and hook in live[n].hooks]
        self._disabled = disabled
        self._orders = orders
        self.built = True
        return self

    def _check_cycles(self) -> None:
        state: dict[str, int] = {}

        def visit(n: str, path: list[str]) -> None:
            if state.get(n) == 2:
                return
            if state.get(n) == 1:
                loop = path[path.index(n):] + [n]
                raise RegistryError(f"extension dependency cycle: {' -> '.join(loop)}")
            state[n] = 1
            for d in self._exts[n].depends_on:
                if d in self._exts:
                    visit(d, [*path, n])
            state[n] = 2

        for n in sorted(self._exts):
            visit(n, [])

    def order(self, hook: str) -> list[str]:
        if not self.built:
            raise RegistryError("the registry is not built: call build() at start-up before firing hooks")
        if hook not in self._orders:
            raise RegistryError(f"unknown hook {hook!r} (hooks: {', '.join(HOOKS)})")
        return list(self._orders[hook])

    def check_order(self, hook: str, sequence: list[str]) -> None:
        """A code path that runs `sequence` for `hook` (e.g. the PolicyCage's tool_call layers) must run them in
        the registry's order; RegistryError naming the two out of order."""
        order = self.order(hook)
        pos = {n: i for i, n in enumerate(order)}
        for name in sequence:
            if name not in pos:
                raise RegistryError(f"{hook}: {name!r} runs here but is not in the {hook} order ({' -> '.join(order)})")
        for a, b in zip(sequence, sequence[1:]):
            if pos[a] > pos[b]:
                raise RegistryError(f"{hook}: {a!r} runs before {b!r}, but the declared order is "
                                    f"{' -> '.join(order)}")

    def matrix(self) -> list[tuple[str, list[str]]]:
        return [(hook, self.order(hook)) for hook in HOOKS]


def _x(name: str, layer: int, hooks: Iterable[str], deps: Iterable[str] = (), optional: bool = False,
       present: bool = True, what: str = "", **where: str) -> Extension:
    return Extension(name=name, layer=layer, hooks=frozenset(hooks), depends_on=tuple(deps), optional=optional,
                     present=present, what=what, where={k.replace("__", "."): v for k, v in where.items()})


def builtin_extensions() -> list[Extension]:
    """The 28 extensions as this build has them."""
    return [
        # Layer 0 – Foundation
        _x("provider-adapter", 0, set(), what="LLM calls through the anthropic SDK (golem.inference.llm)"),
        _x("telemetry", 0, {"after_turn", "tool_call"}, what="record, events, metrics, traces",
           after_turn="reflect: persist the record (golem.life.after_turn); its events go out at turn_end (ui-bridge)",
           tool_call="golem.safety.cage.SafetyCage.tool_call: meters the call (value, post-state); "
                     "validate_layered puts every verdict on the audit trail"),
        _x("audit", 0, set(), what="hash-chained audit trail (golem.safety.audit), written in validate"),
        _x("grimoire", 0, {"session"}, what="LanceDB + SQLite + PLAYBOOK.md",
           session="worker start: GolemServices opens or creates the memory stores (services.session)"),
        _x("tools", 0, {"before_agent_start"}, what="the write and read tools offered to the model",
           before_agent_start="decide: the write-tool schemas offered to the model (golem.inference.decision."
                              "decision_tools) and the reads and speculate of the tool loop "
                              "(golem.chain.tick_reads); the deliberator sends them"),
        _x("heartbeat", 0, {"session", "after_turn"}, what="the 9-step tick (ThetaTickWorkflow)",
           session="GolemWorkflow.run: the loop's state (new, or carried by continue-as-new)",
           after_turn="reflect: the DecisionCycleRecord and the tick's facts"),
        # Layer 1 – Input
        _x("input-router", 1, {"input"}, ["heartbeat"], what="steer / follow_up signals",
           input="GolemWorkflow.follow_up: validate and queue for its window (golem.cognition.fold."
                 "accept_intervention); a steer goes through steer's intervention member"),
        # Layer 2 – State
        _x("context", 2, {"before_agent_start"}, ["grimoire"], what="the Cognitive Workspace",
           before_agent_start="decide: the context policy in force (golem.extensions.agent_start)"),
        _x("daimon", 2, {"after_turn"}, ["grimoire"], what="appraisal → PAD, Plutchik emotion, somatic markers",
           after_turn="golem.life.daimon, golem.safety.somatic"),
        _x("memory", 2, {"after_turn"}, ["grimoire"], what="episode writer, reflexion and credit",
           after_turn="reflect: write_episode, learn_from_outcome"),
        _x("lifespan", 2, {"after_turn", "on_end"}, ["heartbeat"], what="three mortality clocks, phases, death",
           after_turn="golem.life.lifespan",
           on_end="GolemWorkflow._end fires it when the golem dies: Thanatopsis (GolemWorkflow._die, "
                  "golem.life.death); state: life.on_end"),
        # Layer 3 – Safety
        _x("safety", 3, {"tool_call", "before_agent_start"}, ["tools"],
           what="PolicyCage, phase restrictions, drawdown, MUST constraints",
           tool_call="golem.safety.cage.SafetyCage.safety_layer",
           before_agent_start="decide: the pre-LLM MUST gate (SafetyService.pre_llm_gate, agent_start)"),
        _x("permits", 3, {"tool_call"}, ["safety"], what="single-use action permits",
           tool_call="golem.safety.cage.SafetyCage.permit_layer"),
        _x("risk", 3, {"tool_call", "after_turn"}, ["safety", "grimoire"],
           what="hard shields, gas gate, Kelly sizing (shrunk by fired somatic markers), guardrails",
           tool_call="golem.safety.cage.SafetyCage.risk_layer",
           after_turn="reflect: net value, high-water mark, drawdown vs max into the record (record.risk)"),
        _x("result-filter", 3, {"tool_result"}, ["safety"], optional=True,
           what="a read's or speculation's result made fit for the model's context",
           tool_result="decide: the tool loop filters each read's JSON before the model sees it "
                       "(golem.inference.result_filter; the loop: golem.inference.tool_loop)"),
        _x("coordination", 3, {"tool_call"}, ["tools"], optional=True, present=False,
           what="cross-agent tool calls over the ERC-8001/8033/8183 typed interfaces: not in this build (no package "
                "ships their contracts; siblings coordinate through the clade's Temporal workflows)"),
        _x("compiler", 3, {"before_agent_start"}, ["tools"], what="STRATEGY.md → typed strategy",
           before_agent_start="decide: load STRATEGY.md, its viability (golem.extensions.agent_start)"),
        _x("model-router", 3, {"before_agent_start"}, ["provider-adapter"],
           what="tier → model; Conservation and below: T1 only for reflexion",
           before_agent_start="decide: tier → model under today's spend (Deliberator.route, router.choose_model); "
                              "the built prompt's cost is checked in System 2 (router.price_route)"),
        _x("x402-payment", 3, {"before_provider_request"}, ["provider-adapter"], optional=True,
           what="pays each model call from the golem's wallet (x402, USDC transferWithAuthorization)",
           before_provider_request="ProviderRouter.complete fires it when [inference] payment = \"x402\": "
                                   "X402Payer readies the call, X402Transport pays the gateway's 402 "
                                   "(golem.inference.payment)"),
        # Layer 4 – Cognition
        _x("turn-context", 4, {"context"}, ["context"], optional=True,
           what="progressive disclosure: what the allocation held back stays on call (golem.inference.turn_context)",
           context="decide: the tool loop's first turn lists the held-back sections and offers the `workspace` read "
                   "that returns one whole (LLMDeliberator.decide)"),
        _x("dream", 4, {"after_turn"}, ["grimoire", "daimon"], optional=True, what="DreamScheduler and dream cycle",
           after_turn="GolemWorkflow between ticks (schedule_dream), DreamCycleWorkflow"),
        _x("cybernetics", 4, {"after_turn"}, ["context", "grimoire"], optional=True,
           what="context policy self-tuning", after_turn="reflect: golem.learning.cybernetics.tune_context"),
        # The pheromone field and the entry exchange: neither needs coordination (the LP range registry), not in
        # this build.
        _x("clade", 4, {"after_turn"}, ["grimoire"], optional=True,
           what="the clade's pheromone field and entry exchange ([clade] id; docs/design/pheromones.md, "
                "docs/design/clade.md): observe reads the field on the golem's entities, analyze weighs its threat; "
                "siblings' entries pass quarantine, consensus, sandbox, adopt; off for a lone golem",
           after_turn="reflect: lays the tick's threats, opportunities and congestion on the clade's field "
                      "(activities.tick.TickActivities.lay_pheromones; record.pheromones_laid), then shares and "
                      "ingests Grimoire entries (TickActivities.exchange_entries; `golem clade`)"),
        # Layer 5 – UX
        # not optional: the dashboard, `golem events` and the heartbeat monitor read what it emits
        _x("ui-bridge", 5, {"agent_start", "agent_end", "turn_start", "turn_end", "tool_execution_start",
                            "tool_execution_update", "tool_execution_end"}, ["telemetry"],
           what="hook firings as Event Fabric events (golem.events.bridge)",
           agent_start="decide: heartbeat.deliberation_started once the session is set up (tier, model, tools offered)",
           agent_end="decide: heartbeat.deliberation_ended when it answered (model, cost, rounds, tokens) or failed",
           turn_start="observe: heartbeat.tick_started with the tick's vitals and pending steers",
           turn_end="reflect, after after_turn: the record's events, heartbeat.tick_finished last",
           tool_execution_start="execute: actions.sending before an approved action is signed",
           tool_execution_update="execute: actions.tx for each of the action's journaled transactions",
           tool_execution_end="execute: actions.landed with the action's status, block and gas"),
        _x("observability", 5, {"debug", "error"}, ["telemetry"], optional=True, what="structured logs",
           debug="golem show N: the owner asked what the golem thought at a tick; the heartbeat.debug_requested event "
                 "with its regime, phase, tier and cost (cli/records.py)",
           error="the record_failure activity: the tick_failed event (the failure record is written either way)"),
        # Layer 6 – Intervention
        _x("playbook", 6, {"system_prompt"}, ["grimoire"], optional=True,
           what="PLAYBOOK.md in the prompt (the survival state is in the workspace's affect and warnings sections)",
           system_prompt="decide: reads PLAYBOOK.md for the T2 system prompt and the offline deliberator's rules "
                         "(golem.extensions.agent_start.system_prompt, golem.inference.workspace)"),
        _x("intervention", 6, {"send_message", "steer"}, ["heartbeat"], what="steers and follow-ups",
           steer="GolemWorkflow.steer: validate and queue (golem.cognition.fold.accept_intervention); "
                 "ThetaTickWorkflow.steer: interrupt or cancel the running tick",
           send_message="golem steer / followup: deliver the signal, validated first (cli/steer.py)"),
        # Layer 7 – Recovery
        _x("compaction", 7, {"session"}, ["context"], optional=True,
           what="DeFi-aware compaction of the owner's chat session (golem.inference.compaction)",
           session="before_compact: golem chat and the T2 workspace fold the turns older than the tail, keeping the "
                   "cage's hash, positions, phase, PLAYBOOK heuristics and active warnings (golem.usecases.conversation)"),
    ]


def build_registry(disabled: Iterable[str] = (), extra: Iterable[Extension] = ()) -> ExtensionRegistry:
    reg = ExtensionRegistry()
    for ext in [*builtin_extensions(), *extra]:
        reg.register(ext)
    return reg.build(disabled)


_BUILT: dict[tuple[str, ...], ExtensionRegistry] = {}


def registry_for(disabled: Iterable[str] = ()) -> ExtensionRegistry:
    """This build's registry with `[extensions] disabled` switched off, built once per set (the worker builds it
    at start, so a violation stops the start; reflect then reads the same one)."""
    key = tuple(sorted(set(disabled)))
    if key not in _BUILT:
        _BUILT[key] = build_registry(key)
    return _BUILT[key]


def registry_or_full(disabled: Iterable[str] = ()) -> tuple[ExtensionRegistry, RegistryError | None]:
    """`registry_for(disabled)`, or — when the registry refuses that list (a golem.toml mid-edit, an applied version
    the worker's start-up check never saw) — this build's full registry and the refusal, for the caller to say.
    For code that must go on (a steer on its way, a running workflow); the worker's start refuses instead."""
    try:
        return registry_for(disabled), None
    except RegistryError as err:
        return registry_for(), err
