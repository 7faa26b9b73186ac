"""`python -m golem.world.simulator` (and `golem sim`): drive a deployed world step by step from the command
line."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from web3 import Web3

from golem.chain.contracts import MAIN_PAIR, Deployment
from golem.world.devchain import ANVIL_CHAIN_ID, ANVIL_KEYS
from golem.world.simulator.market import MarketSimulator, SimStep
from golem.world.simulator.paths import DEFAULT_CRASH_AFTER, SCENARIOS, SimulatorError


def _keys_for(chain_id: int) -> tuple[str, str]:
    trader_key = os.environ.get("GOLEM_SIM_TRADER_KEY")
    oracle_key = os.environ.get("GOLEM_SIM_ORACLE_KEY")
    if trader_key and oracle_key:
        return trader_key, oracle_key
    if chain_id != ANVIL_CHAIN_ID:
        raise SimulatorError(
            f"chain id {chain_id} is not the local dev chain ({ANVIL_CHAIN_ID}); set GOLEM_SIM_TRADER_KEY "
            "and GOLEM_SIM_ORACLE_KEY — the public Anvil dev keys are only used on chain 31337"
        )
    return trader_key or ANVIL_KEYS[1], oracle_key or ANVIL_KEYS[0]


def format_step(s: SimStep) -> list[str]:
    """The simulator's log lines for one step: the market line, then one line per liquidation."""
    hf = " ".join(f"hf[{u[:8]}]={'inf' if v is None else f'{v:.3f}'}" for u, v in s.health_factors.items())
    lines = [
        f"step={s.step} oracle={s.oracle_price:.2f} round={s.round_id} pool={s.pool_price:.2f} "
        f"arb={s.trade_side} size={s.trade_size:.4f} WETH"
        + "".join(f" {k}={v:.2f}" for k, v in s.pair_prices.items() if k != MAIN_PAIR)
        + "".join(f" posted_{k}={v:.4f}" for k, v in s.stables_posted.items())
        + (f" {hf}" if hf else "")
    ]
    for liq in s.liquidations:
        lines.append(
            f"liquidated user={liq.user} hf={liq.health_factor:.4f} covered={liq.debt_covered:.2f} {liq.debt_asset} "
            f"seized={liq.collateral_seized:.6f} {liq.collateral_asset} tx={liq.tx_hash} block={liq.block_number}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    from golem.chain.web3client import make_web3

    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="golem sim", description="Run the dev world's market simulator.")
    parser.add_argument("--rpc", required=True, help="JSON-RPC URL of the dev chain")
    parser.add_argument("--deployment", type=Path, required=True, help="deployment JSON written by deploy_world")
    parser.add_argument("--scenario", choices=SCENARIOS, default="calm")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between steps")
    parser.add_argument("--steps", type=int, default=None, help="stop after N steps (default: run forever)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--crash-after", type=int, default=DEFAULT_CRASH_AFTER)
    parser.add_argument("--watch", action="append", default=[], metavar="ADDRESS",
                        help="another borrower for the liquidator (Borrow events add them by themselves)")
    parser.add_argument("--no-liquidator", action="store_true", help="never call liquidationCall")
    args = parser.parse_args(argv)
    if args.interval < 0:
        parser.error("--interval must be >= 0")
    if args.steps is not None and args.steps < 0:
        parser.error("--steps must be >= 0")
    for addr in args.watch:
        if not Web3.is_address(addr):
            parser.error(f"--watch {addr!r} is not an address")

    stop = threading.Event()

    def _on_signal(signum: int, _frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)

    try:
        deployment = Deployment.load(args.deployment)
        w3 = make_web3(args.rpc)
        trader_key, oracle_key = _keys_for(w3.eth.chain_id)
        sim = MarketSimulator(
            w3, deployment, trader_key, oracle_key, args.scenario, seed=args.seed, crash_after=args.crash_after,
            watch=args.watch, liquidate=not args.no_liquidator,
        )
    except Exception as exc:
        print(f"simulator: {exc}", file=sys.stderr)
        return 2

    print(f"simulator: scenario={args.scenario} seed={args.seed} trader={sim.trader_address} "
          f"liquidator={'off' if args.no_liquidator else 'on'} watching={','.join(sim.watched) or '-'}", flush=True)
    failures = 0
    done = 0
    while not stop.is_set() and (args.steps is None or done < args.steps):
        try:
            s = sim.step()
        except Exception as exc:  # a chain hiccup should not end the market; many in a row should
            failures += 1
            print(f"simulator: step {sim.step_index} failed: {exc}", file=sys.stderr, flush=True)
            if failures >= 5:
                print("simulator: 5 consecutive failures, exiting", file=sys.stderr)
                return 1
        else:
            failures = 0
            done += 1
            for line in format_step(s):
                print(line, flush=True)
            for msg in s.liquidation_failures:
                print(f"simulator: liquidation failed: {msg}", file=sys.stderr, flush=True)
        if args.steps is not None and done >= args.steps:
            break
        stop.wait(args.interval)
    print("simulator: stopped", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
