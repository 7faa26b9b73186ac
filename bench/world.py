"""Bringing up the embedded world: deploying Uniswap V2 + Aave V3 + Circle's USDC + feeds from their published
bytecode, vs loading the cached Anvil state dump of an earlier deploy, vs one observe-step read of the result.

    python bench/world.py [-n 5]

Each run gets a fresh Anvil; the floor is Anvil's own start to its first eth_chainId answer, measured in the
same run. Prints figures and ratios; never fails.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from golem.chain.reader import read_snapshot  # noqa: E402
from golem.chain.web3client import make_web3  # noqa: E402
from infra.anvil import ANVIL_ADDRESSES, AnvilProcess, free_port  # noqa: E402


def main() -> int:
    import os

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=5)
    args = parser.parse_args()
    os.environ["GOLEM_WORLD_CACHE"] = tempfile.mkdtemp(prefix="golem-world-bench-")
    from infra.world_cache import deploy_or_load

    starts, deploys, loads, reads = [], [], [], []
    for i in range(args.n):
        for cached in (False, True):
            t0 = time.perf_counter()
            with AnvilProcess(port=free_port()) as anvil:
                starts.append(time.perf_counter() - t0)
                w3 = make_web3(anvil.rpc_url)
                t1 = time.perf_counter()
                dep, fresh = deploy_or_load(w3, anvil.rpc_url, use_cache=cached or i > 0)
                (deploys if fresh else loads).append(time.perf_counter() - t1)
                t2 = time.perf_counter()
                read_snapshot(w3, dep, ANVIL_ADDRESSES[2])
                reads.append(time.perf_counter() - t2)

    def fmt(xs: list[float]) -> str:
        return f"p50 {statistics.median(xs) * 1e3:8.1f} ms  (n={len(xs)}, min {min(xs) * 1e3:.1f}, max {max(xs) * 1e3:.1f})"

    floor = statistics.median(starts)
    print(f"anvil start (floor)        {fmt(starts)}")
    print(f"deploy the world           {fmt(deploys)}  = {statistics.median(deploys) / floor:.1f}x floor")
    print(f"load the cached dump       {fmt(loads)}  = {statistics.median(loads) / floor:.2f}x floor")
    print(f"observe read (one batch)   {fmt(reads)}")
    print(f"cache speed-up             {statistics.median(deploys) / statistics.median(loads):.0f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
