"""Use cases: one function per thing a workflow or activity asks of the domain (observe a tick, answer `status`).

The top of golem/: a use case may import any domain package; none imports a use case.
"""
