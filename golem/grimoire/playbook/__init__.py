"""Procedural memory: heuristics distilled from episodes, PLAYBOOK.md compiled from them, the view of it the
admitted semantic store allows, and its survival rate."""
