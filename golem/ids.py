"""Temporal ids and task-queue names of one golem, in one place.

Every workflow id is readable in the Temporal UI's list and searchable by prefix (`WorkflowId STARTS_WITH
"golem-<id>-tick-"`): the golem's own workflow is `golem-<id>`, its ticks `golem-<id>-tick-<n>`, its child
cycles `golem-<id>-<kind>-<tick>`. Plain strings: no Temporal import, so the CLI, the worker and the
workflows (sandboxed) all use it.
"""

from __future__ import annotations


def task_queue(golem_id: str) -> str:
    """The one task queue a golem's worker serves (its workflows and activities)."""
    return f"golem-{golem_id}"


def golem_workflow_id(golem_id: str) -> str:
    """GolemWorkflow: one per golem, continued-as-new under the same id."""
    return f"golem-{golem_id}"


def tick_workflow_id(golem_id: str, tick: int) -> str:
    """ThetaTickWorkflow of tick `tick` (a rerun gets a suffix of its own, see workers/replay.py)."""
    return f"golem-{golem_id}-tick-{tick}"


def cycle_workflow_id(golem_id: str, kind: str, tick: int) -> str:
    """A child cycle started at `tick`: kind "delta" (consolidation) or "dream"."""
    return f"golem-{golem_id}-{kind}-{tick}"


def monitor_workflow_id(golem_id: str) -> str:
    """The heartbeat monitor beside the golem."""
    return f"golem-{golem_id}-monitor"


def doctor_workflow_id(golem_id: str, suffix: str) -> str:
    """A `golem doctor` run (suffix: a random hex string, so runs never collide)."""
    return f"golem-{golem_id}-doctor-{suffix}"


def clade_queue(clade_id: str) -> str:
    """The task queue of a clade's shared workflows (its pheromone field), served by every member's worker."""
    return f"clade-{clade_id}"


def pheromone_field_id(clade_id: str) -> str:
    """PheromoneFieldWorkflow: one per clade, continued-as-new under the same id."""
    return f"clade-{clade_id}-pheromones"


def host_queue(host: str) -> str:
    """The task queue of a fleet host: the workflows and activities of every golem placed on it (docs/design/fleet.md)."""
    return f"golem-host-{host}"


def host_monitor_workflow_id(host: str) -> str:
    """The heartbeat monitor of a fleet host: it watches every golem placed there (not golem-...: no one golem's)."""
    return f"host-{host}-monitor"


def golem_of(workflow_id: str) -> str | None:
    """The golem a workflow belongs to, from its id (golem-<id>, golem-<id>-tick-<n>, golem-<id>-<kind>-<tick>, ...):
    how a fleet worker finds an activity's golem. Fleet golem ids have no '-' (golem.fleet.check_golem_id)."""
    if not workflow_id.startswith("golem-"):
        return None
    return workflow_id[len("golem-"):].split("-", 1)[0] or None
