"""Semantic memory: GrimoireEntry rows in SQLite with a LanceDB mirror, the admission gate that lets entries in,
the knowledge graph and the DeFi topology kept in it."""
