"""Compile the dev world's Vyper sources into committed JSON artifacts.

`python -m golem.world.compile` rebuilds `golem/world/artifacts/<Name>.json`
({"abi": [...], "bytecode": "0x..."}) from `golem/world/contracts/<Name>.vy`,
fully offline with the installed vyper package.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

WORLD_DIR = Path(__file__).resolve().parent
CONTRACTS_DIR = WORLD_DIR / "contracts"
ARTIFACTS_DIR = WORLD_DIR / "artifacts"
CONTRACT_NAMES: tuple[str, ...] = ("Token", "WETH", "Pool", "Oracle", "Lending")


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


def write_artifacts(
    artifacts: dict[str, dict[str, Any]], artifacts_dir: Path = ARTIFACTS_DIR
) -> list[Path]:
    artifacts_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, artifact in artifacts.items():
        path = artifacts_dir / f"{name}.json"
        path.write_text(json.dumps(artifact, indent=1, sort_keys=True) + "\n")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Compile the dev world's Vyper contracts.")
    parser.add_argument("--out", type=Path, default=ARTIFACTS_DIR, help="artifact directory")
    args = parser.parse_args(argv)
    for path in write_artifacts(compile_all(), args.out):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
