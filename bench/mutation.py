"""Mutation testing: delete or negate one statement at a time and see whether a test notices.

    make mutation                                   # every target module, every mutant (hours: nightly)
    python bench/mutation.py --sample 60 --seed 1   # a reproducible random sample across the targets
    python bench/mutation.py --modules golem/safety/policy.py --max-mutants 20
    python bench/mutation.py --list | --cuts        # the mutants without running / only the hand-written cuts

Mutants, mapped tests and what is not mutated: docs/operations/mutation-fuzzing-secrets.md.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

U = "tests/unit/"
I = "tests/integration/"
GOLEM_LOOP = I + "test_golem_loop.py::"
SURVIVORS = U + "test_mutation_survivors.py"  # tests written for mutants that survived
# module → the tests that cover it, fastest first. The decision paths of golem/: gating (threshold, prediction
# error), decide (offline deliberator, decision parsing), the safety cage (policy, cage, service, limits, risk)
# and the chain write path (permits, journal, executor).
TESTS: dict[str, list[str]] = {
    "golem/cognition/threshold.py": [U + "test_prediction_error_gate.py", U + "test_regime_and_feedback_fixes.py",
                                     U + "test_fold.py", SURVIVORS],
    "golem/cognition/prediction_error.py": [U + "test_prediction_error_gate.py", U + "test_topology_curiosity.py"],
    "golem/inference/offline.py": [U + "test_offline_deliberator.py", U + "test_inference_deliberator.py", SURVIVORS],
    "golem/inference/decision.py": [U + "test_inference_tool_offer.py", U + "test_inference_session_eval.py",
                                    U + "test_safety_liquidity.py", U + "test_topology_curiosity.py",
                                    U + "test_inference_deliberator.py", SURVIVORS],
    # decide's policy (one domain call): the MUST gate, the decision cache's key and lookup, the expectation
    "golem/cognition/retrieve.py": [I + "test_retrieve_activity.py", I + "test_wiring.py"],
    "golem/cognition/decide.py": [U + "test_activity_helpers.py", I + "test_decision_cache_decide.py", I + "test_llm_tick.py",
                                  I + "test_wiring.py", I + "test_learning_loop.py"],
    "golem/safety/policy.py": [U + "test_policy.py", U + "test_safety_cage.py", U + "test_safety_liquidity.py",
                               U + "test_gas_partition.py"],
    "golem/safety/cage.py": [U + "test_safety_cage.py", U + "test_gas_partition.py", U + "test_safety_liquidity.py",
                             U + "test_safety_write_tools.py", U + "test_policy.py", U + "test_threats.py"],
    "golem/safety/threats.py": [U + "test_threats.py", I + "test_threats.py"],  # the DeFi threat detectors
    "golem/safety/experience.py": [U + "test_experience.py", I + "test_unviable_from_experience.py"],
    "golem/inference/turn_context.py": [U + "test_tool_loop.py"],  # progressive disclosure
    "golem/inference/compaction.py": [U + "test_compaction.py"],
    "golem/usecases/conversation.py": [U + "test_compaction.py"],
    "golem/life/vitals.py": [U + "test_vitals.py", I + "test_heartbeat_monitor.py"],
    "golem/safety/limits.py": [U + "test_safety_cage.py", U + "test_gas_partition.py", U + "test_safety_liquidity.py",
                               U + "test_safety_speculation_and_strategy.py", I + "test_acting_safety.py"],
    "golem/safety/risk.py": [U + "test_safety_cage.py", U + "test_gas_partition.py", U + "test_safety_liquidity.py"],
    "golem/safety/service.py": [U + "test_gas_partition.py", U + "test_safety_cage.py", I + "test_write_path.py",
                                I + "test_acting_safety.py", I + "test_wiring.py"],
    # the life — the clocks, the daimon, somatic markers, the registry, death and the after_turn chain
    "golem/life/lifespan.py": [U + "test_life_lifespan.py", U + "test_life_after_turn.py"],
    "golem/life/daimon.py": [U + "test_life_daimon.py", U + "test_life_after_turn.py"],
    "golem/safety/somatic.py": [U + "test_life_daimon.py", U + "test_safety_cage.py"],
    "golem/extensions/registry.py": [U + "test_extension_registry.py", U + "test_life_after_turn.py"],
    "golem/life/death.py": [U + "test_life_death.py"],
    "golem/life/after_turn.py": [U + "test_life_after_turn.py", I + "test_life.py"],
    "golem/chain/permits.py": [U + "test_permits_journal.py", U + "test_safety_cage.py", SURVIVORS,
                               I + "test_write_path.py",
                               I + "test_acting_crash.py"],
    "golem/chain/journal.py": [U + "test_permits_journal.py", I + "test_write_path.py", I + "test_acting_crash.py"],
    "golem/chain/executor.py": [I + "test_write_path.py", I + "test_acting_liquidity.py", I + "test_acting_safety.py"],
    # Integration-covered modules: the replay of the committed histories first (a mutant that changes the
    # workflow's commands fails it in seconds), then the wiring tests, then one or two whole-golem runs.
    "activities/tick.py": [U + "test_activity_helpers.py", I + "test_wiring.py", I + "test_retrieve_activity.py",
                           I + "test_decision_cache_decide.py", I + "test_gas_partition_tick.py",
                           GOLEM_LOOP + "test_crash_escalates_and_acts_on_chain"],
    "activities/consolidation.py": [I + "test_wiring.py", I + "test_consolidation_llm.py",
                                    GOLEM_LOOP + "test_calm_golem_runs_twenty_ticks_mostly_t0",
                                    I + "test_learning_loop.py"],  # the Curator's rule reaches a later decision
    "activities/heartbeat.py": [U + "test_activity_heartbeat.py", I + "test_llm_tick.py"],
    "golem/grimoire/episodes/writes.py": [I + "test_wiring.py", I + "test_golem_loop.py"],
    "workers/services.py": [I + "test_wiring.py", I + "test_topology_tick.py", I + "test_config_versions.py",
                            GOLEM_LOOP + "test_crash_escalates_and_acts_on_chain"],
    "workers/config_versions.py": [I + "test_config_versions.py"],
    "workflows/tick.py": [I + "test_replay_histories.py", I + "test_wiring.py",
                          GOLEM_LOOP + "test_steer_forces_t2_and_malformed_steer_is_recorded",
                          GOLEM_LOOP + "test_crash_escalates_and_acts_on_chain"],
    "workflows/golem.py": [I + "test_replay_histories.py", I + "test_wiring.py",
                           GOLEM_LOOP + "test_calm_golem_runs_twenty_ticks_mostly_t0",
                           GOLEM_LOOP + "test_steer_forces_t2_and_malformed_steer_is_recorded",
                           I + "test_rejection_expiry.py", I + "test_backtest.py",  # the replay clock (advance_world)
                           I + "test_life.py"],  # death, the kill update, the Phase search attribute
    "workflows/consolidation.py": [I + "test_replay_histories.py", I + "test_consolidation_llm.py",
                                   GOLEM_LOOP + "test_calm_golem_runs_twenty_ticks_mostly_t0", I + "test_wiring.py",
                                   I + "test_dreams.py"],  # a critical steer wakes a dreaming golem
}

# Hand-written cuts: a wire a careless refactor could cut in a way the two AST operators do not make (a part of an
# expression dropped, a call swapped), each with the tests that must catch it. Run with every full run, alone with
# `--ids cut:<name>` or `--cuts` (all of them); `--list` shows them.
CUTS: dict[str, tuple[str, str, str, list[str]]] = {
    # name: (module, original text, cut text, tests)
    "codec-env": ("workers/client.py", "codec if codec is not None else codec_from_env()", "codec",
                  [U + "test_codec.py"]),  # an owner's GOLEM_PAYLOAD_KEYS ignored: plaintext histories
    "as-of-valid-from": ("golem/grimoire/semantic/index.py", "m = (self.valid_from <= at) & (at < self.valid_until)",
                         "m = (at < self.valid_until)", [I + "test_grimoire_valid_from.py"]),
    "replay-theta": ("workflows/golem.py",
                     "if world.tick_due(self._s.theta_seconds) or self._s.pending_steers:", "if True:",
                     [I + "test_backtest_theta.py"]),
    "self-steer": ("activities/tick.py", "        await self._self_steer(inp, chain.record)\n", "",
                   [I + "test_golem_loop.py::test_crash_escalates_and_acts_on_chain"]),
    "restricted": ("workflows/tick.py", "cancelled_reason=self._cancel_reason, restricted=restricted,",
                   "cancelled_reason=self._cancel_reason, restricted=None,", [I + "test_restricted.py"]),
    "dream-tick-queue": ("workflows/golem_steps.py",
                         'if not replay and workflow.patched("dream-tick-queue"):',
                         "if False:", [I + "test_golem_loop.py::test_calm_golem_runs_twenty_ticks_mostly_t0"]),
    "agent-end": ("activities/tick.py", '        ended = agent_end("answered", deliberation.record)\n',
                  "        ended: list[str] = []\n",
                  [I + "test_cancel_pending.py"]),
    "stop-console": ("infra/stack.py", 'say("\\nstopping ...")', 'print("\\nstopping ...", flush=True)',
                     [I + "test_run_shutdown.py::test_ctrl_c_through_a_dead_pipe_after_a_worker_restart_leaves_nothing"]),
    "console-silence": ("infra/console.py", "        _silence(stream, fd)\n        return False\n    except OSError:",
                        "        return False\n    except OSError:", [U + "test_stop_sweep.py"]),
    "temporal-supervised": ("infra/stack.py", "children[:] = [*([temporal_child] if temporal_child else []), anvil_child,",
                            "children[:] = [anvil_child,",
                            [I + "test_run_shutdown.py::test_ctrl_c_through_a_dead_pipe_after_a_worker_restart_leaves_nothing"]),
    # the validate activity's read of the recent blocks, and the verdicts carried onto the record's actions
    "threat-window": ("activities/tick.py", "market=self._market_window(obs, ctx.cfg.policy.threat_window_blocks)",
                      "market=None", [I + "test_threats.py::test_a_steered_swap_after_a_flash_loan_shaped_move_is_held_on_the_record"]),
    "threat-record": ("activities/tick.py", "threats=verdict.threats if verdict is not None else [])", "threats=[])",
                      [I + "test_threats.py::test_a_steered_swap_after_a_flash_loan_shaped_move_is_held_on_the_record"]),
    "sweep-groups": ("infra/supervisor.py", "(ppid == parent or pgrp in groups)", "(ppid == parent)",
                     [U + "test_stop_sweep.py"]),
    # the strategy judged by experience: validate's restriction, decide's model-router, the delta step
    "viability-validate": ("activities/tick.py", "restricted=self._restriction(ctx),", "restricted=None,",
                           [I + "test_unviable_from_experience.py"]),
    "viability-route": ("activities/tick.py", "route=lambda: self._route(inp),",
                        "route=lambda: self.s.deliberator.route(inp),", [I + "test_unviable_from_experience.py"]),
    "viability-step": ("workflows/consolidation.py", 'and workflow.patched("delta-viability"):', "and False:",
                       [I + "test_unviable_from_experience.py"]),
    "turn-context": ("golem/inference/llm.py", '{"turn-context": lambda: disclose(ws, reads)}', "{}",
                     [U + "test_tool_loop.py"]),
    "compaction": ("golem/usecases/conversation.py", '"session", {"compaction": compaction}', '"session", {}',
                   [U + "test_compaction.py"]),
    "debug-hook": ("cli/records.py", "    _debug_requested(args, rec)\n", "",
                   [U + "test_inference_commands.py"]),
    "delta-background": ("workflows/golem.py", 'if not replay and workflow.patched("delta-background"):', "if False:",
                         [I + "test_delta_beside_ticks.py"]),
    "stall-since-start": ("activities/monitor.py", "paused=paused, serving_since=self.serving_since)", "paused=paused)",
                          [I + "test_heartbeat_monitor.py::test_a_stack_stopped_for_hours_is_not_a_stall_for_the_worker_that_just_started"]),
    "regime-cells": ("golem/learning/regime_eval.py", "return None if any(v is None for v in vals) else vals",
                     'return ("all",)', [I + "test_regime_rollback.py::test_a_beta_loss_does_not_demote_a_heuristic"]),
    "head-pinned": ("golem/chain/reader.py", "reads = _plan(deployment, account, hex(head_number(w3)))",
                    "reads = _plan(deployment, account)",
                    [I + "test_fuzz_rpc.py::test_a_block_mined_during_the_read_does_not_split_the_snapshot"]),
}

_LOG_ROOTS = {"log", "logger", "logging", "print"}


@dataclass
class Mutant:
    module: str
    line: int
    kind: str  # delete | negate
    text: str  # the original source (first line), for the report
    start: tuple[int, int]  # (line, col) 1-based line, 0-based col
    end: tuple[int, int]
    status: str = ""  # killed | survived | timeout | skipped
    seconds: float = 0.0
    detail: str = ""

    @property
    def id(self) -> str:
        return f"cut:{self.text}" if self.kind == "cut" else f"{self.module}:{self.line}:{self.kind}"


def cut_mutants() -> list[Mutant]:
    """CUTS as mutants (kind `cut`, text = the cut's name); a cut whose original text is gone is an error: the map
    must follow the code."""
    out = []
    for name, (module, old, _new, _tests) in CUTS.items():
        source = (ROOT / module).read_text()
        if source.count(old) != 1:
            raise SystemExit(f"cut {name}: {module} holds its original text {source.count(old)} times (need 1): "
                             "update CUTS in bench/mutation.py")
        line = source[:source.index(old)].count("\n") + 1
        out.append(Mutant(module, line, "cut", name, (line, 0), (line, 0)))
    return out


def _is_logging(stmt: ast.stmt) -> bool:
    if not isinstance(stmt, ast.Expr) or not isinstance(stmt.value, ast.Call):
        return False
    f = stmt.value.func
    while isinstance(f, ast.Attribute):
        if isinstance(f.value, ast.Name) and f.value.id in ("workflow",) and f.attr == "logger":
            return True
        f = f.value
    return isinstance(f, ast.Name) and f.id in _LOG_ROOTS


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def mutants_of(module: str, source: str) -> list[Mutant]:
    tree = ast.parse(source)
    lines = source.splitlines()
    out: list[Mutant] = []

    def marked(node: ast.AST) -> bool:
        return any("no-mutate" in lines[n - 1] for n in range(node.lineno, (node.end_lineno or node.lineno) + 1)
                   if n - 1 < len(lines) and "# " in lines[n - 1])

    def add(kind: str, node: ast.AST) -> None:
        out.append(Mutant(module, node.lineno, kind, lines[node.lineno - 1].strip()[:100],
                          (node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset)))

    # A function's last statement `return` / `return None` does what falling off its end does: deleting it is
    # an equivalent mutant, never killable, so it is not made.
    tail_returns = {id(f.body[-1]) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and isinstance(f.body[-1], ast.Return)
                    and (f.body[-1].value is None or (isinstance(f.body[-1].value, ast.Constant)
                                                      and f.body[-1].value.value is None))}

    def visit_body(body: list[ast.stmt]) -> None:
        for stmt in body:
            if marked(stmt) or id(stmt) in tail_returns:
                continue
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit_body(stmt.body)
                continue
            if isinstance(stmt, ast.ClassDef):  # its methods; field declarations are definitions, not behaviour
                visit_body([s for s in stmt.body
                            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))])
                continue
            if isinstance(stmt, (ast.If, ast.While)):
                add("negate", stmt.test)
            simple = not hasattr(stmt, "body")
            if (simple and not _is_docstring(stmt) and not _is_logging(stmt)
                    and not isinstance(stmt, (ast.Pass, ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal))):
                add("delete", stmt)
            for node in ast.walk(stmt) if simple else ():
                if isinstance(node, ast.IfExp):
                    add("negate", node.test)
            for field in ("body", "orelse", "finalbody"):
                visit_body(getattr(stmt, field, []) or [])
            for h in getattr(stmt, "handlers", []) or []:
                visit_body(h.body)
            for c in getattr(stmt, "cases", []) or []:
                visit_body(c.body)

    # module level: only inside functions and classes' methods (definitions run at import)
    visit_body([n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))])
    return out


def _offset(lines: list[str], pos: tuple[int, int]) -> int:
    # ast columns are UTF-8 byte offsets
    line, col = pos
    return sum(len(x.encode()) for x in lines[: line - 1]) + col


def apply(source: str, m: Mutant) -> str:
    if m.kind == "cut":
        _module, old, cut, _tests = CUTS[m.text]
        return source.replace(old, cut, 1)
    lines = source.splitlines(keepends=True)
    raw = source.encode()
    a, b = _offset(lines, m.start), _offset(lines, m.end)
    if m.kind == "delete":
        new = raw[:a] + b"pass" + raw[b:]
    else:
        new = raw[:a] + b"(not (" + raw[a:b] + b"))" + raw[b:]
    return new.decode()


def make_scratch() -> Path:
    scratch = Path(tempfile.mkdtemp(prefix="golem-mutation-"))
    listing = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]  # uncommitted work too
    files = subprocess.run(listing, cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    for f in files:
        if not f:
            continue
        src = ROOT / f.decode()
        if not src.is_file():
            continue
        dst = scratch / f.decode()
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
    for link in (".venv", "node_modules"):
        if (ROOT / link).exists():
            (scratch / link).symlink_to(ROOT / link)
    return scratch


def run_tests(scratch: Path, tests: list[str], timeout: float) -> tuple[str, float, str]:
    """pytest in its own process group: a timeout or Ctrl-C ends it with everything it started (dev server, Anvil)."""
    env = {**os.environ, "PYTHONPATH": str(scratch), "PYTHONDONTWRITEBYTECODE": "1"}
    t0 = time.monotonic()
    proc = subprocess.Popen([str(ROOT / ".venv/bin/python"), "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                             *tests], cwd=scratch, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _end_group(proc)
        return "timeout", time.monotonic() - t0, f"timed out after {timeout:.0f}s"
    except BaseException:
        _end_group(proc)
        raise
    dt = time.monotonic() - t0
    tail = (out.strip().splitlines() or [err.strip()[-200:]])[-1]
    failed = next((ln for ln in out.splitlines() if ln.startswith("FAILED") or ln.startswith("ERROR")), "")
    return ("passed" if proc.returncode == 0 else "failed"), dt, (failed or tail)[:200]


def _end_group(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=wait)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modules", default="", help="comma-separated module paths (default: all of TESTS)")
    ap.add_argument("--max-mutants", type=int, default=0, help="at most this many mutants per module (0 = all)")
    ap.add_argument("--sample", type=int, default=0, help="a random sample of N mutants across the modules")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=0, help="per mutant, seconds (default 3x baseline, >= 120)")
    ap.add_argument("--ids", default="", help="only these mutants, comma-separated module:line:kind (as printed)")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--cuts", action="store_true", help="only the hand-written cuts (CUTS)")
    ap.add_argument("--json", default="", help="write every mutant's result to this file")
    args = ap.parse_args()

    only = {i.strip() for i in args.ids.split(",") if i.strip()}
    cut_ids = {i for i in only if i.startswith("cut:")}
    only -= cut_ids
    all_cuts = cut_mutants()
    if cut_ids - {m.id for m in all_cuts}:
        print(f"unknown cut(s) {sorted(cut_ids - {m.id for m in all_cuts})}: see CUTS in bench/mutation.py")
        return 2
    if args.cuts or cut_ids:
        cuts = [m for m in all_cuts if args.cuts or m.id in cut_ids]
    else:  # a full or sampled run includes every cut; --modules / --ids pick mutants of their own
        cuts = [] if (only or args.modules) else all_cuts
    modules = ([m.strip() for m in args.modules.split(",") if m.strip()] or sorted({i.rsplit(":", 2)[0] for i in only})
               or ([] if (args.cuts or cut_ids) else list(TESTS)))
    unknown = [m for m in modules if m not in TESTS]
    if unknown:
        print(f"unknown module(s) {unknown}: add them to TESTS in bench/mutation.py with the tests that cover them")
        return 2
    rng = random.Random(args.seed)
    per_module = {}
    for mod in modules:
        ms = mutants_of(mod, (ROOT / mod).read_text())
        if only:
            ms = [m for m in ms if m.id in only]
        if args.max_mutants and len(ms) > args.max_mutants:
            ms = sorted(rng.sample(ms, args.max_mutants), key=lambda m: m.line)
        per_module[mod] = ms
    chosen = [m for ms in per_module.values() for m in ms]
    if args.sample and args.sample < len(chosen):
        chosen = rng.sample(chosen, args.sample)
        keep = {id(m) for m in chosen}
        per_module = {mod: [m for m in ms if id(m) in keep] for mod, ms in per_module.items()}
    for m in cuts:  # each cut runs against its own tests, as a module of its own
        per_module[m.id] = [m]
    total = sum(len(v) for v in per_module.values())
    print(f"{total} mutants over {sum(1 for v in per_module.values() if v)} modules "
          f"({', '.join(f'{k}: {len(v)}' for k, v in per_module.items() if v)})", flush=True)
    if args.list:
        for ms in per_module.values():
            for m in ms:
                print(f"  {m.id:55} {m.text}")
        return 0

    scratch = make_scratch()
    results: list[Mutant] = []
    t_start = time.monotonic()
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        for mod, ms in per_module.items():
            if not ms:
                continue
            tests = CUTS[ms[0].text][3] if ms[0].kind == "cut" else TESTS[mod]
            status, base_s, detail = run_tests(scratch, tests, timeout=1800)
            if status != "passed":
                print(f"[baseline] {mod}: its tests fail unmutated ({detail}); skipped {len(ms)} mutants", flush=True)
                for m in ms:
                    m.status, m.detail = "skipped", "baseline failed"
                results += ms
                continue
            timeout = args.timeout or max(120.0, 3 * base_s)
            print(f"[baseline] {mod}: {len(tests)} test files pass in {base_s:.0f}s; {len(ms)} mutants", flush=True)
            path = scratch / ms[0].module
            original = path.read_text()
            for m in ms:
                try:
                    mutated = apply(original, m)
                    ast.parse(mutated)
                except SyntaxError:
                    m.status, m.detail = "skipped", "mutant does not parse"
                    results.append(m)
                    continue
                path.write_text(mutated)
                try:
                    st, m.seconds, m.detail = run_tests(scratch, tests, timeout)
                finally:
                    path.write_text(original)
                m.status = {"failed": "killed", "passed": "survived"}.get(st, st)
                results.append(m)
                print(f"  {m.status:8} {m.seconds:5.0f}s  {m.id:50} {m.text[:70]}", flush=True)
    except KeyboardInterrupt:  # Ctrl-C / SIGTERM: the score of what ran so far (the running pytest got the signal too)
        print("\ninterrupted: the score below counts the mutants that finished")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    ran = [m for m in results if m.status in ("killed", "survived", "timeout")]
    killed = [m for m in ran if m.status in ("killed", "timeout")]
    survivors = [m for m in ran if m.status == "survived"]
    score = 100.0 * len(killed) / len(ran) if ran else 0.0
    print(f"\nmutation score: {len(killed)}/{len(ran)} killed = {score:.1f}% "
          f"({sum(m.status == 'timeout' for m in ran)} by timeout; "
          f"{sum(m.status == 'skipped' for m in results)} skipped) in {time.monotonic() - t_start:.0f}s")
    if survivors:
        print("survivors:")
        for m in survivors:
            print(f"  {m.id:55} {m.text}")
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(m) for m in results], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
