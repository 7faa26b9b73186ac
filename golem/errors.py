"""Errors the `golem` command reports as one line instead of a traceback."""


class UserError(Exception):
    """A mistake the user can fix (a wrong tick, a missing data dir, a golem not running): the CLI's `main()`
    prints `golem <command>: <message>` as one line on stderr and exits 1, never a traceback. Say what,
    why and the fix. (Its own module: under `python -m golem.cli` the CLI module runs as __main__, and a
    class defined there would not be the one command modules raise.)"""
