"""The workflow sandbox reads compiled workflow modules: under PYTHONDONTWRITEBYTECODE Python keeps no .pyc, and the
sandbox, which imports a workflow's modules afresh for every new run, compiled them from source on every tick
(docs/design/fleet.md#what-a-tick-costs-the-worker)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import workflows

CHECK = """
import importlib.util, sys
from pathlib import Path
import workflows
from workers.worker import worker_options
worker_options(sandboxed=True)
print(sys.pycache_prefix)
for src in sorted(Path(workflows.__file__).parent.glob("*.py")):
    print(src.name, Path(importlib.util.cache_from_source(str(src))).exists())
"""


def test_a_sandboxed_workers_options_leave_every_workflow_module_compiled(tmp_path):
    env = {"PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": str(tmp_path), "PATH": "/usr/bin:/bin",
           "PYTHONPATH": str(Path(workflows.__file__).resolve().parents[1])}
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, env=env, check=True).stdout
    prefix, *rows = out.split("\n")
    assert prefix.startswith(str(tmp_path)), "the bytecode goes to the temp dir, not into the source tree"
    compiled = dict(r.split() for r in rows if r)
    assert "tick.py" in compiled and set(compiled.values()) == {"True"}, compiled


def test_the_workflows_package_loads_a_workflow_on_first_use():
    out = subprocess.run([sys.executable, "-c", "import sys, workflows.tick; "
                          "print(sorted(m for m in sys.modules if m.startswith('workflows.')))"],
                         capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(Path(workflows.__file__).resolve().parents[1]), "PATH": "/usr/bin:/bin"}).stdout
    assert "workflows.golem" not in out and "workflows.tick" in out, out
    assert {w.__name__ for w in workflows.ALL_WORKFLOWS} == {
        "GolemWorkflow", "ThetaTickWorkflow", "DeltaConsolidationWorkflow", "DreamCycleWorkflow", "DoctorWorkflow",
        "HeartbeatMonitorWorkflow", "HostMonitorWorkflow", "PheromoneFieldWorkflow", "CladeExchangeWorkflow",
        "MemoryConsolidatorWorkflow"}
    assert importlib.util.find_spec("workflows.golem") is not None
