"""Compile the dev world's Vyper sources and vendor the protocols' ABIs, into committed JSON.

`python -m golem.world.compile` rebuilds `golem/world/artifacts/<Name>.json`
({"abi": [...], "bytecode": "0x..."}) from `golem/world/contracts/<Name>.vy`, fully offline with the
installed vyper package, and writes `golem/chain/abis/<Name>.json` (ABI only) for every contract the
golem talks to: ours from the Vyper build, Uniswap V2's, Aave V3's and Circle's USDC's from their published npm
artifacts.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

WORLD_DIR = Path(__file__).resolve().parent
CONTRACTS_DIR = WORLD_DIR / "contracts"
ARTIFACTS_DIR = WORLD_DIR / "artifacts"
# Token: DAI of the embedded world (DAI's own bytecode is not published on npm; USDC is Circle's published build;
# on a fork the address book points at the real ones). PriceFeed: a Chainlink AggregatorV3-style feed.
CONTRACT_NAMES: tuple[str, ...] = ("Token", "PriceFeed")
ABIS_DIR = WORLD_DIR.parent / "chain" / "abis"
# vendored ABI name → where it comes from: ("vyper", contract) or ("npm", published artifact name)
ABI_SOURCES: dict[str, tuple[str, str]] = {
    "ERC20": ("vyper", "Token"),
    "FiatToken": ("npm", "FiatTokenV2_2"),  # Circle's USDC: EIP-3009 and EIP-2612 besides ERC-20
    "PriceFeed": ("vyper", "PriceFeed"),
    "WETH9": ("npm", "WETH9"),
    "UniswapV2Factory": ("npm", "UniswapV2Factory"),
    "UniswapV2Router02": ("npm", "UniswapV2Router02"),
    "UniswapV2Pair": ("npm", "UniswapV2Pair"),
    "PoolAddressesProvider": ("npm", "PoolAddressesProvider"),
    "AavePool": ("npm", "Pool"),
    "AaveOracle": ("npm", "AaveOracle"),
    "AaveProtocolDataProvider": ("npm", "AaveProtocolDataProvider"),
    "AToken": ("npm", "AToken"),
    "VariableDebtToken": ("npm", "VariableDebtToken"),
}


class CompileError(RuntimeError):
    """A contract source failed to compile; the message names the file."""


def compile_source(name: str, contracts_dir: Path = CONTRACTS_DIR) -> dict[str, Any]:
    """Compile one contract; returns {"abi": list, "bytecode": "0x..."}."""
    import vyper  # imported lazily: compiling is a build step, not a runtime need

    path = contracts_dir / f"{name}.vy"
    if not path.is_file():
        raise CompileError(f"contract source not found: {path}")
    try:
        out = vyper.compile_code(path.read_text(), output_formats=["abi", "bytecode"])
    except Exception as exc:  # vyper raises many exception types; surface them with the file
        raise CompileError(f"vyper failed to compile {path}: {exc}") from exc
    bytecode = out["bytecode"]
    if not bytecode.startswith("0x"):
        bytecode = "0x" + bytecode
    return {"abi": out["abi"], "bytecode": bytecode}


def compile_all(contracts_dir: Path = CONTRACTS_DIR) -> dict[str, dict[str, Any]]:
    return {name: compile_source(name, contracts_dir) for name in CONTRACT_NAMES}


def _write_json(items: dict[str, Any], folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, content in items.items():
        path = folder / f"{name}.json"
        path.write_text(json.dumps(content, indent=1, sort_keys=True) + "\n")
        written.append(path)
    return written


def write_artifacts(artifacts: dict[str, dict[str, Any]], artifacts_dir: Path = ARTIFACTS_DIR) -> list[Path]:
    return _write_json(artifacts, artifacts_dir)


def vendored_abis(compiled: dict[str, dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Every ABI the golem loads at run time, from the Vyper build and the pinned npm artifacts."""
    from golem.world.protocols import artifact

    out = {}
    for name, (kind, source) in ABI_SOURCES.items():
        out[name] = compiled[source]["abi"] if kind == "vyper" else artifact(source)["abi"]
    return out


def write_abis(abis: dict[str, list[dict[str, Any]]], abis_dir: Path = ABIS_DIR) -> list[Path]:
    return _write_json(abis, abis_dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Compile the dev world's Vyper contracts and vendor the ABIs.")
    parser.add_argument("--out", type=Path, default=ARTIFACTS_DIR, help="artifact directory")
    parser.add_argument("--abis", type=Path, default=ABIS_DIR, help="vendored ABI directory")
    args = parser.parse_args(argv)
    compiled = compile_all()
    for path in write_artifacts(compiled, args.out) + write_abis(vendored_abis(compiled), args.abis):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
