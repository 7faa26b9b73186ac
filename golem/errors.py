"""Errors the `golem` command reports as one line instead of a traceback."""


class UserError(Exception):
    """A mistake the user can fix (a wrong tick, a missing data dir, a golem not running): the CLI's `main()`
    prints `golem <command>: <message>` as one line on stderr and exits 1, never a traceback. Say what,
    why and the fix. (In golem/ because domain code raises it too, e.g. golem.grimoire.access.open_stores, and
    golem/ never imports cli/.)"""
