"""How fast the `golem` CLI answers: wall time of `golem --help`, `golem ticks` (a data dir with 200
recorded ticks) and `golem status` / `golem steer` (a real Temporal dev server, started here), each beside
the floor `python -c pass` measured in the same run, and which heavy packages each command imported.

    python bench/cli_startup.py [--repeat 5]

Figures only (median of --repeat runs); it never fails a build.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# Packages a reading command should not need: chain, vector store, LLM SDK, the Temporal worker runtime.
HEAVY = ("web3", "eth_account", "lancedb", "pyarrow", "anthropic", "numpy", "temporalio.worker")


def timed(cmd: list[str], env: dict, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def heavy_imports(cmd: list[str], env: dict) -> list[str]:
    out = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]], cwd=REPO, env=env, capture_output=True, text=True)
    loaded = {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    return [m for m in HEAVY if m in loaded]


def seed_data_dir(data: Path) -> None:
    from golem.life.cycle_store import CycleStore
    from golem.models.golem import TickFailure

    store = CycleStore(data)
    for tick in range(200):  # failures are real index rows and need no chain to make
        store.record_failure(TickFailure(golem_id="bench", tick=tick, workflow_id=f"golem-bench-tick-{tick}",
                                         error="observe: connection refused", failed_at="2026-01-01T00:00:00+00:00"))


def start_temporal(tmp: Path) -> tuple[subprocess.Popen, str]:
    from infra.anvil import free_port
    from infra.temporal import port_open, temporal_cli

    port = free_port()
    proc = subprocess.Popen([str(temporal_cli()), "server", "start-dev", "--headless", "--port", str(port),
                             "--ui-port", str(free_port()), "--log-level", "error"],
                            stdout=(tmp / "temporal.log").open("w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while not port_open("127.0.0.1", port):
        if time.monotonic() > deadline:
            raise SystemExit("bench: the Temporal dev server did not start")
        time.sleep(0.2)
    time.sleep(1.0)  # the namespace is ready a moment after the port opens
    return proc, f"127.0.0.1:{port}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="golem-cli-bench-"))
    seed_data_dir(tmp / "data")
    server, address = start_temporal(tmp)
    try:
        env = dict(os.environ, GOLEM_HOME=str(REPO / "examples" / "golem-home"), GOLEM_DATA=str(tmp / "data"),
                   GOLEM_TEMPORAL_ADDRESS=address)
        golem = [sys.executable, "-m", "cli"]
        floor = timed([sys.executable, "-c", "pass"], env, args.repeat)
        cases = {
            "golem --help": [*golem, "--help"],
            "golem ticks (200 rows)": [*golem, "ticks", "-n", "200"],
            "golem status (no golem: connect + query)": [*golem, "status"],
            "golem steer (no golem: connect + signal)": [*golem, "steer", "bench", "--id", "bench-1"],
        }
        print(f"python {sys.version.split()[0]}, median of {args.repeat} runs")
        print(f"{'command':44} {'wall s':>7} {'x floor':>8}  heavy imports")
        print(f"{'python -c pass (floor)':44} {floor:7.3f} {1.0:8.1f}")
        for name, cmd in cases.items():
            wall = timed(cmd, env, args.repeat)
            heavy = heavy_imports(cmd, env)
            print(f"{name:44} {wall:7.3f} {wall / floor:8.1f}  {', '.join(heavy) or '-'}")
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
