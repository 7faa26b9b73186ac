"""Episodic memory: the Episode (one per tick), its LanceDB store, the in-memory retrieval index, and the writes a
tick makes beyond its own episode."""
