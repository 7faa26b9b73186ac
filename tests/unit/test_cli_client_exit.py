"""Every command living in a cli module that opens a Temporal client leaves with os._exit once its output is flushed:
the SDK's runtime threads can call into Python while the interpreter finalizes (a `golem reset` in CI died with
"PyGILState_Release … finalizing", SIGABRT, after it had done its work)."""

from __future__ import annotations

import re
from pathlib import Path

from cli.main import _CLIENT_COMMANDS

CLI = Path(__file__).resolve().parents[2] / "cli"


def test_every_command_of_a_module_that_opens_a_client_leaves_by_os_exit():
    missing = {}
    for path in sorted(CLI.glob("*.py")):
        text = path.read_text()
        if not re.search(r"await client\(args\)|workers\.client import connect", text):
            continue
        names = set(re.findall(r'command\(\s*"([a-z-]+)"', text))
        if names - _CLIENT_COMMANDS:
            missing[path.name] = sorted(names - _CLIENT_COMMANDS)
    assert not missing, f"commands that open a Temporal client but exit through finalization: {missing}"
