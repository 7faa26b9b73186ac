"""Write-path latency per action on a real Anvil against the real protocols (Uniswap V2 Router02 swaps,
Aave V3 Pool repays and borrows): simulate + validate + execute + verify, how much of each step is
chain time (JSON-RPC round trips) vs our own code, and the gas each kind of action costs.

    python bench/write_path.py [-n 20]

The floor is a bare eth_blockNumber round trip measured in the same run. Prints figures; never fails.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eth_account import Account  # noqa: E402

from golem.chain.executor import Executor  # noqa: E402
from golem.chain.reader import read_snapshot  # noqa: E402
from golem.chain.simulate import simulate_actions  # noqa: E402
from golem.chain.web3client import make_web3  # noqa: E402
from golem.models.config import GolemConfig  # noqa: E402
from golem.models.enums import BehavioralPhase  # noqa: E402
from golem.models.observation import Observation  # noqa: E402
from golem.models.tick import ProposedAction  # noqa: E402
from golem.safety.service import SafetyService  # noqa: E402
from infra.anvil import ANVIL_ADDRESSES, ANVIL_KEYS, AnvilProcess, free_port  # noqa: E402
from infra.world_cache import deploy_or_load  # noqa: E402

# The cycle of actions: sell and buy back on the pair, repay and re-borrow on Aave (the position stays put).
CYCLE = (
    ("swap", {"token_in": "WETH", "token_out": "USDC", "amount_in": 0.1}),
    ("swap", {"token_in": "USDC", "token_out": "WETH", "amount_in": 150}),
    ("repay", {"amount": 150}),
    ("borrow", {"amount": 150}),
)


class RpcClock:
    """Accumulates the wall time spent inside the provider's JSON-RPC calls."""

    def __init__(self, provider) -> None:
        self.total = 0.0
        self.calls = 0
        # Every JSON-RPC request (single or batch) goes through the session manager's POST.
        manager = provider._request_session_manager
        manager.make_post_request = self._timed(manager.make_post_request)

    def _timed(self, fn):
        def wrapper(*a, **kw):
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.total += time.perf_counter() - t
                self.calls += 1
        return wrapper


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=20, help="actions to run")
    n = ap.parse_args().n
    with tempfile.TemporaryDirectory() as tmp:
        anvil = AnvilProcess(port=free_port(), log_path=Path(tmp) / "anvil.log")
        anvil.start()
        try:
            w3 = make_web3(anvil.rpc_url)
            world = deploy_or_load(w3, anvil.rpc_url)[0]
            golem = ANVIL_ADDRESSES[2]
            cfg = GolemConfig()
            cfg.probes.kill_switch_path = str(Path(tmp) / "no-killswitch")
            svc = SafetyService(cfg, Path(tmp) / "data")
            executor = Executor(w3, world, Account.from_key(ANVIL_KEYS[2]), svc.journal, svc.permits, poll_latency_s=0.01)
            clock = RpcClock(w3.provider)

            floor = []
            for _ in range(max(30, n)):
                t = time.perf_counter()
                w3.provider.make_request("eth_blockNumber", [])
                floor.append(time.perf_counter() - t)

            steps = {k: {"wall": [], "rpc": [], "calls": []} for k in ("simulate", "validate", "execute", "verify")}
            totals = []
            gas: dict[str, list[tuple[int, int, int]]] = {}  # tool → (action gas, main tx gas, txs)

            def timed(step, fn):
                r0, c0, t0 = clock.total, clock.calls, time.perf_counter()
                out = fn()
                steps[step]["wall"].append(time.perf_counter() - t0)
                steps[step]["rpc"].append(clock.total - r0)
                steps[step]["calls"].append(clock.calls - c0)
                return out

            for i in range(n):
                tool, args = CYCLE[i % len(CYCLE)]
                action = ProposedAction(action_index=0, tool=tool, arguments=args)
                t_all = time.perf_counter()
                obs = Observation(snapshot=read_snapshot(w3, world, golem))
                sim = timed("simulate", lambda: simulate_actions(w3, world, golem, [action], obs))
                val, _ = timed("validate", lambda: svc.validate("bench", i, BehavioralPhase.THRIVING, [action], sim, obs))
                permit = val.actions[0].permit_id
                assert permit, val.actions[0].reason
                rec = timed("execute", lambda: svc.execute(executor, "bench", i, action, permit, obs))
                w3.provider.make_request("evm_mine", [])  # the 2nd confirmation (Anvil mines on demand)
                ov = timed("verify", lambda: svc.verify(w3, world, "bench", i, golem, [action], sim, [rec], obs))
                assert ov.outcome.verified, (ov.outcome.actual, ov.invariant_violations)
                totals.append(time.perf_counter() - t_all)
                main_gas = w3.eth.get_transaction_receipt(rec.tx_hash)["gasUsed"]
                gas.setdefault(tool, []).append((rec.gas_used, main_gas, len(svc.journal.intents_for("bench", i, 0))))

            f = statistics.median(floor) * 1000
            print(f"write path on Anvil, {n} actions cycling {', '.join(t for t, _ in CYCLE)} (Router02 / Aave V3 Pool), "
                  "2 confirmations")
            print(f"floor: eth_blockNumber round trip  median {f:.2f} ms   p90 {pct(floor, 0.9) * 1000:.2f} ms")
            print(f"{'step':<10}{'median ms':>10}{'p90 ms':>9}{'× floor':>9}{'rpc calls':>10}{'chain ms':>10}{'ours ms':>9}{'chain %':>9}")
            whole_wall = whole_rpc = 0.0
            for k, s in steps.items():
                med, rpc = statistics.median(s["wall"]), statistics.median(s["rpc"])
                whole_wall += sum(s["wall"])
                whole_rpc += sum(s["rpc"])
                print(f"{k:<10}{med * 1000:>10.1f}{pct(s['wall'], 0.9) * 1000:>9.1f}{med * 1000 / f:>9.1f}"
                      f"{statistics.median(s['calls']):>10.0f}{rpc * 1000:>10.1f}{(med - rpc) * 1000:>9.1f}"
                      f"{(rpc / med * 100 if med else 0):>8.0f}%")
            per = whole_wall / n * 1000
            print(f"per action (4 steps): {per:.1f} ms = {per / f:.1f}× floor; chain time {whole_rpc / whole_wall * 100:.0f}%, "
                  f"our code {100 - whole_rpc / whole_wall * 100:.0f}%")
            print(f"including the observation read and the extra mined block: median {statistics.median(totals) * 1000:.1f} ms")
            print(f"{'gas':<10}{'action':>10}{'main tx':>10}{'txs':>6}   (action = approve + call [+ revoke])")
            for tool, rows in gas.items():
                action_gas, main_gas, txs = (statistics.median(r[j] for r in rows) for j in range(3))
                print(f"{tool:<10}{action_gas:>10,.0f}{main_gas:>10,.0f}{txs:>6.0f}")
        finally:
            anvil.stop()


if __name__ == "__main__":
    main()
