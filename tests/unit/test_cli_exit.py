"""Every `golem` command leaves with os._exit once its output is flushed and its logs are closed: the Temporal core's
threads can call into Python while the interpreter finalizes (a `golem reset`, and a process forwarding a core
warning, died in CI with "PyGILState_Release … finalizing", SIGABRT, after they had done their work)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# An atexit handler runs only if the interpreter finalizes: it must not run.
SCRIPT = textwrap.dedent('''
    import atexit, logging, sys
    import cli.main
    atexit.register(lambda: print("FINALIZED", file=sys.stderr, flush=True))
    how, where = sys.argv[1], sys.argv[2]
    if how == "bug":
        def _run(args):
            raise RuntimeError("a bug in the command")
        cli.main._run = _run
    elif how == "log":
        def _run(args):
            import logging.handlers  # a buffering handler: it writes its lines only when flushed or closed
            buffered = logging.handlers.MemoryHandler(1000, target=logging.FileHandler(where))
            logger = logging.getLogger("golem.leave")
            logger.addHandler(buffered)
            logger.setLevel(logging.INFO)
            logger.info("the last line")
            return 0
        cli.main._run = _run
    sys.argv = ["golem", "ticks", "--data", where]
    sys.exit(cli.main.main())
''')


def _golem(tmp_path: Path, how: str, data: Path) -> subprocess.CompletedProcess:
    script = tmp_path / "leave.py"
    script.write_text(SCRIPT)
    return subprocess.run([sys.executable, str(script), how, str(data)], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


def test_a_command_that_ends_well_or_with_a_user_error_or_a_bug_never_finalizes_the_interpreter(tmp_path):
    (tmp_path / "data").mkdir()
    ok = _golem(tmp_path, "ok", tmp_path / "data")  # no records yet: ticks says so and exits 0
    assert ok.returncode == 0, ok.stderr
    assert "FINALIZED" not in ok.stderr

    user = _golem(tmp_path, "ok", tmp_path / "nowhere")
    assert user.returncode == 1
    assert "golem ticks: no data directory" in user.stderr  # what to fix, one line
    assert "FINALIZED" not in user.stderr

    bug = _golem(tmp_path, "bug", tmp_path / "data")
    assert bug.returncode == 1
    assert "RuntimeError: a bug in the command" in bug.stderr  # the traceback a maintainer needs
    assert "FINALIZED" not in bug.stderr


def test_the_commands_log_is_flushed_before_the_process_ends(tmp_path):
    log = tmp_path / "golem.log"
    done = _golem(tmp_path, "log", log)
    assert done.returncode == 0, done.stderr
    assert "the last line" in log.read_text()
