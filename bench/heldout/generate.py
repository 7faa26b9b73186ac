"""The held-out market paths: a sealed set the golem is judged on and never tuned on (bench/heldout/README.md).

Its own maths on purpose: a SplitMix64 stream and Box-Muller normals written here, no import from the development
generators, so the set neither follows their changes nor shares their seeds or shapes. Pure and exact: the same
code writes the same bytes on any Python. `python bench/heldout/generate.py [OUT_DIR]` writes the CSVs;
`--manifest` also rewrites MANIFEST.json (the hashes tests/unit/test_heldout_seal.py checks).
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
EPOCH = 1_772_409_600  # 2026-03-02T00:00:00Z: not the shipped paths' epoch
ROW_SECONDS = 60
START_PRICE = 2000.0  # the dev world deploys the position at 2,000 USDC/WETH: the same loan at row 0
HEADER = "tick,timestamp,pool_price,oracle_price,gas_gwei,volume_usd,regime"
MASK = (1 << 64) - 1


class Stream:
    """SplitMix64 (Steele, Lea, Flood 2014): integer arithmetic only, so every platform draws the same numbers."""

    def __init__(self, seed: int) -> None:
        self.state = (seed * 0x9E3779B97F4A7C15) & MASK
        self._spare: float | None = None

    def uniform(self) -> float:
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        z ^= z >> 31
        return ((z >> 11) + 0.5) / float(1 << 53)  # in (0, 1): log() never sees 0

    def normal(self) -> float:
        if self._spare is not None:
            out, self._spare = self._spare, None
            return out
        r = math.sqrt(-2.0 * math.log(self.uniform()))
        a = 2.0 * math.pi * self.uniform()
        self._spare = r * math.sin(a)
        return r * math.cos(a)

    def student(self, dof: int) -> float:
        """A fat-tailed shock, scaled to unit variance (dof > 2)."""
        chi = sum(self.normal() ** 2 for _ in range(dof))
        return self.normal() / math.sqrt(chi / dof) * math.sqrt((dof - 2) / dof)


class Path_:
    """Rows under construction: the pool moves by returns; the oracle follows it unless a path says otherwise."""

    def __init__(self, seed: int, gas_level: float = 0.8, volume: float = 15_000.0) -> None:
        self.rng = Stream(seed)
        self.price = START_PRICE * (1.0 + 0.002 * self.rng.normal())
        self.gas_level = gas_level
        self.volume = volume
        self.rows: list[tuple[float, float, float, float, str]] = []

    def gas(self, level: float | None = None) -> float:
        return max(0.05, (level or self.gas_level) * math.exp(0.12 * self.rng.normal()))

    def vol(self, mult: float = 1.0) -> float:
        return self.volume * mult * math.exp(0.6 * self.rng.normal() - 0.18)

    def step(self, ret: float, regime: str, *, oracle: float | None = None, gas: float | None = None,
             volume_mult: float = 1.0) -> None:
        self.price = max(50.0, self.price * math.exp(ret))
        pool = self.price * (1.0 + 0.0003 * self.rng.normal())  # arbitraged within a few bps of fair value
        self.rows.append((pool, self.price if oracle is None else oracle, self.gas() if gas is None else gas,
                          self.vol(volume_mult), regime))

    def csv(self) -> str:
        lines = [HEADER]
        for i, (pool, oracle, gas, vol, regime) in enumerate(self.rows):
            lines.append(f"{i},{EPOCH + ROW_SECONDS * i},{pool:.6f},{oracle:.6f},{gas:.4f},{vol:.2f},{regime}")
        return "\n".join(lines) + "\n"


# ---- the paths ---------------------------------------------------------------------------------------
def bleed_accelerating(p: Path_) -> None:
    """A decline that starts too slow to notice and speeds up: −0.08 %/row rising to −0.63 %/row."""
    for _ in range(25):
        p.step(0.0006 * p.rng.normal(), "calm")
    n = 185
    for k in range(n):
        drift = -0.0008 - 0.0055 * (k / n) ** 1.5
        p.step(drift + 0.0009 * p.rng.normal(), "trending_down")


def gap_through_line(p: Path_) -> None:
    """A drift down to HF ≈ 1.8, then one row of −27 % (through the repay line and the floor at once), a dead
    bounce and a grinding base."""
    for _ in range(30):
        p.step(0.0007 * p.rng.normal(), "calm")
    for _ in range(45):
        p.step(-0.0028 + 0.0012 * p.rng.normal(), "trending_down")
    p.step(-0.315, "crash", gas=p.gas(6.0), volume_mult=8.0)  # the gap: one row, oracle and pool together
    for k in range(6):
        p.step(0.012 - 0.004 * k + 0.004 * p.rng.normal(), "volatile", gas=p.gas(3.0 - 0.4 * k))
    for _ in range(88):
        p.step(-0.0004 + 0.0030 * p.rng.normal(), "calm")


def crash_gas_spike(p: Path_) -> None:
    """A crash of ~38 % in 12 rows while the base fee spikes to 60–180× its usual level, then the fee decays
    over 25 rows as the market finds a floor."""
    for _ in range(45):
        p.step(0.0008 * p.rng.normal(), "calm")
    moves = [-0.03, -0.055, -0.07, -0.02, -0.06, 0.025, -0.065, -0.05, -0.03, 0.015, -0.04, -0.02]
    for k, r in enumerate(moves):
        level = p.gas_level * (60.0 + 120.0 * math.sin(math.pi * (k + 1) / 13))
        p.step(r + 0.004 * p.rng.normal(), "crash", gas=p.gas(level), volume_mult=6.0)
    peak = p.gas_level * 120.0
    for k in range(25):
        p.step(0.001 + 0.008 * p.rng.normal(), "volatile",
               gas=p.gas(p.gas_level + peak * math.exp(-k / 5.0)), volume_mult=2.0)
    for _ in range(93):
        p.step(0.0015 * p.rng.normal(), "calm")


def bear_relief_rallies(p: Path_) -> None:
    """A long bear (−0.48 %/row) broken by four relief rallies of +7–11 % over 5–7 rows, each given back."""
    for _ in range(15):
        p.step(0.0006 * p.rng.normal(), "calm")
    rallies = {45: (6, 0.11), 95: (5, 0.07), 145: (7, 0.10), 195: (5, 0.08)}
    k = 0
    while k < 230:
        if k in rallies:
            n, total = rallies[k]
            for _ in range(n):
                p.step(total / n + 0.003 * p.rng.normal(), "trending_up")
            k += n
        else:
            p.step(-0.0048 + 0.003 * p.rng.normal(), "trending_down")
            k += 1


def oracle_stale_steps(p: Path_) -> None:
    """The pool falls 24 % over 20 rows; the oracle answers in stale steps: it posts only every fourth row, and
    then the pool's price of two rows before (so it lags 2–5 rows), until it catches up after the fall."""
    for _ in range(50):
        p.step(0.0006 * p.rng.normal(), "calm")
    oracle = p.price
    history: list[float] = []
    for k in range(20):
        p.step(-0.0137 + 0.006 * p.rng.normal(), "crash" if k < 12 else "trending_down", oracle=oracle)
        history.append(p.rows[-1][0])
        if k % 4 == 3 and len(history) > 2:
            oracle = history[-3]
        p.rows[-1] = (p.rows[-1][0], oracle, *p.rows[-1][2:])
    for k in range(6):  # the pool stalls; the feed still lags, then catches up
        p.step(0.002 * p.rng.normal(), "trending_down", oracle=oracle if k < 3 else None)
    for _ in range(104):
        p.step(0.0009 * p.rng.normal(), "calm")


def jump_diffusion(p: Path_) -> None:
    """Merton jump diffusion: a 0.45 %/row diffusion with jumps (probability 4 %/row, size N(−2.5 %, 4 %))."""
    for _ in range(210):
        jump = 0.0
        if p.rng.uniform() < 0.04:
            jump = -0.025 + 0.04 * p.rng.normal()
        r = -0.0002 + 0.0045 * p.rng.normal() + jump
        p.step(r, "volatile" if jump else "calm", volume_mult=4.0 if jump else 1.0)


def garch_clusters(p: Path_) -> None:
    """GARCH(1,1) with Student-t shocks: calm stretches and bursts of volatility that persist (α 0.13, β 0.84)."""
    omega, alpha, beta = 0.000_000_9, 0.13, 0.84
    var = omega / (1.0 - alpha - beta)
    r = 0.0
    for _ in range(220):
        var = omega + alpha * r * r + beta * var
        r = -0.0004 + math.sqrt(var) * p.rng.student(5)
        p.step(r, "volatile" if math.sqrt(var) > 0.009 else "calm", volume_mult=1.0 + 150.0 * abs(r))


def choppy_range(p: Path_) -> None:
    """An Ornstein-Uhlenbeck range: ±2–3 % swings around 1,950 that keep reverting (κ 0.35/row), no trend."""
    mean = math.log(1950.0)
    for _ in range(200):
        x = math.log(p.price)
        p.step(0.35 * (mean - x) + 0.017 * p.rng.normal(), "volatile")


def meltup_crash(p: Path_) -> None:
    """A melt-up (+0.45 %/row for 100 rows, ~+55 %), then a crash of ~40 % in 14 rows, then a nervous chop."""
    for _ in range(100):
        p.step(0.0045 + 0.002 * p.rng.normal(), "trending_up")
    for _ in range(14):
        p.step(-0.036 + 0.012 * p.rng.normal(), "crash", gas=p.gas(8.0), volume_mult=5.0)
    for _ in range(66):
        p.step(0.006 * p.rng.normal(), "volatile")


def staircase_dead_cats(p: Path_) -> None:
    """A staircase down: nine legs of −8 % in two rows, each followed by a dead-cat bounce of +3 % over three rows
    and a flat shelf of twelve rows."""
    for _ in range(20):
        p.step(0.0006 * p.rng.normal(), "calm")
    for _ in range(9):
        for _ in range(2):
            p.step(-0.0417 + 0.003 * p.rng.normal(), "crash")
        for _ in range(3):
            p.step(0.0099 + 0.002 * p.rng.normal(), "trending_up")
        for _ in range(12):
            p.step(0.0012 * p.rng.normal(), "calm")
    for _ in range(15):
        p.step(0.0008 * p.rng.normal(), "calm")


# name → (generator, seed). Seeds are fixed once, not searched: a seed is not chosen for what the golem does on it.
PATHS: dict[str, tuple[Callable[[Path_], None], int]] = {
    "bleed_accelerating": (bleed_accelerating, 7_301),
    "gap_through_line": (gap_through_line, 7_302),
    "crash_gas_spike": (crash_gas_spike, 7_303),
    "bear_relief_rallies": (bear_relief_rallies, 7_304),
    "oracle_stale_steps": (oracle_stale_steps, 7_305),
    "jump_diffusion": (jump_diffusion, 7_306),
    "garch_clusters": (garch_clusters, 7_307),
    "choppy_range": (choppy_range, 7_308),
    "meltup_crash": (meltup_crash, 7_309),
    "staircase_dead_cats": (staircase_dead_cats, 7_310),
}


def path_csv(name: str) -> str:
    fn, seed = PATHS[name]
    p = Path_(seed)
    fn(p)
    return p.csv()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def manifest() -> dict[str, Any]:
    """What the seal checks: this file's hash and each path's, with its rows."""
    paths = {}
    for name in PATHS:
        text = path_csv(name)
        paths[f"{name}.csv"] = {"sha256": sha256(text.encode()), "rows": text.count("\n") - 1}
    return {"generator": {"file": "generate.py", "sha256": sha256(Path(__file__).read_bytes())}, "paths": paths}


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    write_manifest = "--manifest" in args
    rest = [a for a in args if a != "--manifest"]
    out = Path(rest[0]) if rest else HERE / "paths"
    out.mkdir(parents=True, exist_ok=True)
    for name in PATHS:
        (out / f"{name}.csv").write_text(path_csv(name))
        print(f"wrote {out / name}.csv")
    if write_manifest:
        (HERE / "MANIFEST.json").write_text(json.dumps(manifest(), indent=1) + "\n")
        print(f"wrote {HERE / 'MANIFEST.json'}")


if __name__ == "__main__":
    main()
