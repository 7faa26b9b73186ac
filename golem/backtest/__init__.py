"""Backtests: the same golem on a recorded market path (one code path for live and backtest: docs/design/backtest.md).

Pure parts live here (the path format, the per-row marks, the report); the replay driver that sets
the chain to a row is in golem/backtest/replay.py, and the runner that starts Temporal + Anvil + a worker
is in infra/backtest.py.
"""
