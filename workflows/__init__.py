"""Temporal workflows only: deterministic orchestration, no I/O."""

from workflows.clade_exchange import CladeExchangeWorkflow
from workflows.consolidator import MemoryConsolidatorWorkflow
from workflows.consolidation import DeltaConsolidationWorkflow, DreamCycleWorkflow
from workflows.doctor import DoctorWorkflow
from workflows.golem import GolemWorkflow
from workflows.monitor import HeartbeatMonitorWorkflow, HostMonitorWorkflow
from workflows.pheromones import PheromoneFieldWorkflow
from workflows.tick import ThetaTickWorkflow

ALL_WORKFLOWS = [GolemWorkflow, ThetaTickWorkflow, DeltaConsolidationWorkflow, DreamCycleWorkflow, DoctorWorkflow,
                 HeartbeatMonitorWorkflow, PheromoneFieldWorkflow, CladeExchangeWorkflow,
                 MemoryConsolidatorWorkflow, HostMonitorWorkflow]
