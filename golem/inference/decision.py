"""The decision as tool use: the tools the model may call, and the checks its answer must pass.

Tools: the grant's write tools of `golem.chain.tools.schemas.TOOL_SCHEMAS` (restricted to approved assets), `decide`,
and `request_privileged` for tools outside the grant (a request for the owner, never an action). Every call is checked; a call that fails becomes a rejection reason in the record, never a ProposedAction, and
text that tries to override limits or instructions drops every action.
The checks and why: docs/design/inference.md#the-decisions-checks.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from golem.chain.tools.arguments import parse_arguments, tool_tokens
from golem.chain.tools.schemas import TOOL_SCHEMAS, ToolArgumentError
from golem.grimoire.semantic.topology import LLM_PREDICATES, MAX_LLM_FACTS
from golem.models.tick import ProposedAction

MAX_ACTIONS = 5
DECIDE = "decide"
REQUEST_PRIVILEGED = "request_privileged"
MAX_REQUESTS = 3  # privileged requests in one tick
STRATEGY_MD = "STRATEGY.md"  # what decide.strategy names when a decision serves the always-on strategy


def request_tool(privileged: list[str]) -> dict[str, Any]:
    """Ask the owner for a write outside the grant: nothing runs this tick (docs/design/inference.md#privileged-tools)."""
    return {
        "name": REQUEST_PRIVILEGED,
        "description": (
            "Ask the owner to approve a write this golem may not make on its own (outside its grant: "
            f"{', '.join(privileged)}). Nothing runs this tick and the rest of your decision goes on. If the owner "
            "approves, the action runs on a later tick through every safety check (limits, simulation) like any "
            "other; if they deny it or do not answer in time, it never runs. Call it beside `decide`."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "tool": {"type": "string", "enum": list(privileged), "description": "the privileged write tool"},
                "arguments": {"type": "object", "description": "that tool's arguments, as its own schema has them"},
                "reason": {"type": "string", "maxLength": 500,
                           "description": "why, for the owner: what it does and why now, citing the facts"},
            },
            "required": ["tool", "arguments", "reason"],
            "additionalProperties": False,
        },
    }

DECIDE_TOOL: dict[str, Any] = {
    "name": DECIDE,
    "description": (
        "Record this tick's decision. Call exactly once, after any write tools. recommends_action=false "
        "means hold (no write tools)."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "reasoning_summary": {"type": "string", "description": "why, in 1-5 sentences, citing the facts used"},
            "decision": {"type": "string", "description": "one line: what you decided"},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "recommends_action": {"type": "boolean"},
            "steers_addressed": {"type": "array", "items": {"type": "string"},
                                 "description": "ids of owner steers this decision responds to"},
            "mental_models": {"type": "array", "items": {"type": "string"}, "maxItems": 5,
                              "description": "ids of the mental models this decision applied (mm-…, or a retrieved "
                                             "entry tagged mental-model)"},
            # relations the model extracted (tkg_triples), checked before use
            "facts": {
                "type": "array", "maxItems": MAX_LLM_FACTS,
                "description": "optional: relations between DeFi entities you noticed, using entity ids from the "
                               "topology listed under Positions (e.g. a pool that prices another protocol)",
                "items": {
                    "type": "object",
                    "properties": {"subject": {"type": "string"}, "predicate": {"type": "string",
                                                                                 "enum": list(LLM_PREDICATES)},
                                   "object": {"type": "string"}},
                    "required": ["subject", "predicate", "object"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["reasoning_summary", "confidence", "recommends_action"],
        "additionalProperties": False,
    },
}

# Text that tries to talk its way past the limits (prompt injection echoed back, or a model persuaded).
_OVERRIDE = re.compile(
    r"ignore (all |any |the )?(previous|prior|above|earlier) (instructions|rules|limits|constraints)"
    r"|disregard (the |all )?(instructions|rules|limits|constraints|invariants|policy)"
    r"|(override|bypass|disable|lift|raise|increase|widen|remove) (the |all |any )?"
    r"(policy ?cage|policy|limits?|caps?|max[_ ]trade[_ ]size\w*|max[_ ]slippage\w*|approved[_ ]assets|invariants?|constraints?|kill[_ ]switch)"
    r"|new (system )?instructions|you are now|developer mode|jailbreak",
    re.I,
)


def decision_tools(approved_assets: list[str], privileged: list[str] | None = None,
                   strategies: list[str] | None = None) -> list[dict[str, Any]]:
    """The grant's write tools (token enums narrowed to approved assets; `privileged` ones left out) + decide, and
    `request_privileged` for the privileged tools the approved assets allow; the last carries a cache breakpoint.
    `strategies`: the ids of the strategies active this tick; decide then asks which one the decision serves."""
    tools = [t for t in _write_tools(approved_assets) if t["name"] not in (privileged or [])]
    askable = requestable(approved_assets, privileged)
    if askable:
        tools.append(request_tool(askable))
    tools.append(copy.deepcopy(DECIDE_TOOL))
    if strategies:  # absent with none active, so a golem without strategies/ sends the tool as before
        tools[-1]["input_schema"]["properties"]["strategy"] = {
            "type": "string", "enum": [*strategies, STRATEGY_MD],
            "description": "which strategy this decision's writes serve: an active strategy's id (they count toward "
                           f"its completion, e.g. `after N actions`), or {STRATEGY_MD} for the standing strategy"}
    tools[-1]["cache_control"] = {"type": "ephemeral"}
    return tools


def requestable(approved_assets: list[str], privileged: list[str] | None) -> list[str]:
    """The privileged tools whose assets are all approved: approval widens the grant, never the approved assets."""
    return [t["name"] for t in _write_tools(approved_assets) if t["name"] in (privileged or [])]


def _write_tools(approved_assets: list[str]) -> list[dict[str, Any]]:
    approved = [a.upper() for a in approved_assets]
    tools = []
    for name, schema in TOOL_SCHEMAS.items():
        if name == "swap":
            s = copy.deepcopy(schema)
            for key in ("token_in", "token_out"):
                prop = s["input_schema"]["properties"][key]
                prop["enum"] = [t for t in prop["enum"] if t in approved]
            if len(s["input_schema"]["properties"]["token_in"]["enum"]) < 2:
                continue  # nothing to swap between
            tools.append(s)
        elif all(t in approved for t in tool_tokens(name, {})):  # every asset the tool moves is approved
            tools.append(copy.deepcopy(schema))
    return tools


@dataclass
class ParsedDecision:
    actions: list[ProposedAction] = field(default_factory=list)
    reasoning_summary: str = ""
    decision: str = ""
    confidence: float = 0.0
    recommends_action: bool = False
    steers_addressed: list[str] = field(default_factory=list)
    facts: list[tuple[str, str, str]] = field(default_factory=list)  # (subject, predicate, object), shape-checked
    mental_models: list[str] = field(default_factory=list)  # as the model named them, known ids only
    rejections: list[str] = field(default_factory=list)
    text: str = ""  # free text the model wrote outside tools
    requests: list[tuple[str, dict[str, Any], str]] = field(default_factory=list)  # (tool, arguments, reason), checked
    strategy: str = ""  # decide.strategy: an active strategy's id or STRATEGY.md ("" when not named or refused)


def _plain(v: Any) -> Any:
    return float(v) if isinstance(v, Decimal) else v


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)] + [k for k in value if isinstance(k, str)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _facts(raw: Any, rejections: list[str]) -> list[tuple[str, str, str]]:
    """decide.facts → (subject, predicate, object) triples of non-empty short strings; the rest is refused.
    Whether the entities exist and the predicate is allowed is checked against the graph when asserting."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        rejections.append(f"decide.facts must be a list, got {type(raw).__name__}; ignored")
        return []
    out: list[tuple[str, str, str]] = []
    for i, f in enumerate(raw):
        parts = [f.get(k) for k in ("subject", "predicate", "object")] if isinstance(f, dict) else []
        words = [x.strip() for x in parts if isinstance(x, str) and x.strip() and len(x) <= 200]
        if not parts or len(words) != len(parts):
            rejections.append(f"decide.facts[{i}] needs subject, predicate and object as short strings; ignored")
            continue
        out.append((words[0], words[1], words[2]))
    return out


def _models(raw: Any, known: set[str] | None, rejections: list[str]) -> list[str]:
    """decide.mental_models → the ids the prompt offered (core models, retrieved entries); others refused."""
    if raw is None:
        return []
    names = [m for m in raw if isinstance(m, str)] if isinstance(raw, list) else []
    out = [m for m in names if known is None or m in known]
    unknown = [m for m in names if m not in out]
    if unknown or not isinstance(raw, list):
        rejections.append(f"decide.mental_models: {', '.join(unknown) or repr(raw)} not offered this tick; ignored")
    return list(dict.fromkeys(out))[:5]


def _strategy(raw: Any, active: list[str], rejections: list[str]) -> str:
    """decide.strategy → an active strategy's id or STRATEGY.md; anything else is refused (the actions stand, they are
    credited as if no strategy were named)."""
    if raw is None or raw == "":
        return ""
    if isinstance(raw, str) and raw in (*active, STRATEGY_MD):
        return raw
    rejections.append(f"decide.strategy {raw!r} is not an active strategy (active: {', '.join(active) or 'none'}; "
                      f"or {STRATEGY_MD}); not credited to any")
    return ""


def _request(args: Any, askable: list[str], approved: set[str]) -> tuple[str, dict[str, Any], str] | str:
    """One request_privileged call checked like a write call (its tool's own argument check, approved assets), or
    the reason it is refused."""
    if not isinstance(args, dict):
        return "request_privileged needs an object with tool, arguments and reason"
    tool, arguments, reason = args.get("tool"), args.get("arguments"), args.get("reason")
    if tool not in askable:
        return (f"request_privileged: {tool!r} cannot be requested (privileged tools this golem may ask for: "
                f"{', '.join(askable) or 'none'})")
    if not isinstance(reason, str) or not reason.strip():
        return f"request_privileged({tool}) needs a reason for the owner"
    if not isinstance(arguments, dict):
        return f"request_privileged({tool}).arguments must be an object of {tool}'s arguments"
    try:
        parsed = parse_arguments(tool, arguments)
    except ToolArgumentError as err:
        return f"request_privileged({tool}) refused: {err}"
    bad = [t for t in tool_tokens(tool, parsed) if t not in approved]
    if bad:
        return f"request_privileged({tool}) refused: {', '.join(bad)} not in approved assets"
    return tool, {k: _plain(v) for k, v in parsed.items() if v is not None}, reason.strip()[:500]


def parse_decision(content: list[Any], approved_assets: list[str],
                   known_models: set[str] | None = None, privileged: list[str] | None = None,
                   strategies: list[str] | None = None) -> ParsedDecision:
    """Turn the reply's content blocks (SDK objects or dicts) into a checked decision. Pure. `known_models`: the
    mental-model ids the prompt offered (None: any id is taken). `privileged`: tools outside the grant — a direct
    call to one is refused, a request_privileged for one is kept as a request. `strategies`: the active strategies'
    ids, which decide.strategy may name (besides STRATEGY.md)."""
    approved = {a.upper() for a in approved_assets}
    askable = requestable(approved_assets, privileged)
    out = ParsedDecision()
    decides: list[dict[str, Any]] = []
    candidates: list[tuple[str, Any]] = []  # arguments as the model sent them (checked when the action is built)
    asks: list[Any] = []
    texts: list[str] = []
    for block in content:
        b = block if isinstance(block, dict) else block.model_dump()
        if b.get("type") == "text":
            texts.append(b.get("text") or "")
        elif b.get("type") == "tool_use":
            name, args = b.get("name"), b.get("input")
            texts.extend(_strings(args))
            if name == DECIDE:
                decides.append(args if isinstance(args, dict) else {})
            elif name == REQUEST_PRIVILEGED:
                asks.append(args)
            elif isinstance(name, str) and name in (privileged or []):
                out.rejections.append(f"{name} is outside this golem's grant: ask the owner with request_privileged")
            elif isinstance(name, str) and name in TOOL_SCHEMAS:
                candidates.append((name, args))
            else:
                out.rejections.append(f"unknown tool {name!r} refused (write tools: {', '.join(TOOL_SCHEMAS)}, and decide)")
    out.text = "\n".join(t for t in texts if t)

    # The decide call
    if not decides:
        out.rejections.append("no `decide` call: confidence set to 0 and no action taken")
    else:
        if len(decides) > 1:
            out.rejections.append(f"{len(decides)} `decide` calls; the first is used")
        d = decides[0]
        out.reasoning_summary = str(d.get("reasoning_summary") or "")[:4000]
        out.decision = str(d.get("decision") or "")[:500]
        conf = d.get("confidence")
        if isinstance(conf, (int, float)) and not isinstance(conf, bool) and 0.0 <= conf <= 1.0:
            out.confidence = float(conf)
        else:
            out.rejections.append(f"decide.confidence {conf!r} is not a number in [0, 1]; set to 0")
        rec = d.get("recommends_action")
        out.recommends_action = rec if isinstance(rec, bool) else False
        if not isinstance(rec, bool):
            out.rejections.append(f"decide.recommends_action {rec!r} is not a boolean; taken as false")
        steers = d.get("steers_addressed") or []
        out.steers_addressed = [s for s in steers if isinstance(s, str)] if isinstance(steers, list) else []
        out.facts = _facts(d.get("facts"), out.rejections)
        out.mental_models = _models(d.get("mental_models"), known_models, out.rejections)
        out.strategy = _strategy(d.get("strategy"), strategies or [], out.rejections)

    injected = _OVERRIDE.search(out.text)
    if injected:
        out.rejections.append(f"answer tries to override limits or instructions (\"{injected.group(0)}\"): "
                              f"all {len(candidates)} proposed action(s) refused")
        candidates, asks = [], []
        out.facts = []  # the answer as a whole is suspect: its facts are not remembered either
    if asks and not decides:
        out.rejections.append(f"{len(asks)} request_privileged call(s) without a `decide` call: refused")
        asks = []
    for args in asks:
        checked = _request(args, askable, approved)
        if isinstance(checked, str):
            out.rejections.append(checked)
        elif len(out.requests) >= MAX_REQUESTS:
            out.rejections.append(f"request_privileged: more than {MAX_REQUESTS} requests in one tick; refused")
        else:
            out.requests.append(checked)
    if candidates and decides and not out.recommends_action:
        out.rejections.append(f"{len(candidates)} write call(s) contradict decide(recommends_action=false): refused")
        candidates = []
    if not decides and candidates:
        out.rejections.append(f"{len(candidates)} write call(s) without a `decide` call: refused")
        candidates = []

    for name, args in candidates:
        if len(out.actions) >= MAX_ACTIONS:
            out.rejections.append(f"{name}: more than {MAX_ACTIONS} actions in one tick; refused")
            continue
        try:
            parsed = parse_arguments(name, args)
        except ToolArgumentError as err:
            out.rejections.append(f"{name} refused: {err}")
            continue
        bad = [t for t in tool_tokens(name, parsed) if t not in approved]
        if bad:
            out.rejections.append(f"{name} refused: {', '.join(bad)} not in approved assets ({', '.join(sorted(approved))})")
            continue
        arguments = {k: _plain(v) for k, v in parsed.items() if v is not None}
        if name == "swap" and (not isinstance(args, dict) or args.get("max_slippage_bps") is None):
            arguments.pop("max_slippage_bps", None)  # the executor applies its default, as for offline actions
        out.actions.append(ProposedAction(action_index=len(out.actions), tool=name, arguments=arguments,
                                          rationale=(out.decision or out.reasoning_summary)[:300]))
    if out.recommends_action and not out.actions:
        out.recommends_action = False
    return out
