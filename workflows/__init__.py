"""Temporal workflows only: deterministic orchestration, no I/O.

The workflow classes load on first use (ALL_WORKFLOWS, or their own modules): the sandbox imports a workflow's package
afresh for every new workflow run, so a tick pays only for the modules its own workflow imports
(docs/design/fleet.md#what-a-tick-costs-the-worker).
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {"CladeExchangeWorkflow": "clade_exchange", "MemoryConsolidatorWorkflow": "consolidator",
          "DeltaConsolidationWorkflow": "consolidation", "DreamCycleWorkflow": "consolidation",
          "DoctorWorkflow": "doctor", "GolemWorkflow": "golem", "HeartbeatMonitorWorkflow": "monitor",
          "HostMonitorWorkflow": "monitor", "PheromoneFieldWorkflow": "pheromones", "ThetaTickWorkflow": "tick"}
_ORDER = ["GolemWorkflow", "ThetaTickWorkflow", "DeltaConsolidationWorkflow", "DreamCycleWorkflow", "DoctorWorkflow",
          "HeartbeatMonitorWorkflow", "PheromoneFieldWorkflow", "CladeExchangeWorkflow", "MemoryConsolidatorWorkflow",
          "HostMonitorWorkflow"]


def __getattr__(name: str) -> Any:
    if name == "ALL_WORKFLOWS":
        return [__getattr__(n) for n in _ORDER]
    if name in _WHERE:
        return getattr(importlib.import_module(f"workflows.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'workflows' has no attribute {name!r}")
