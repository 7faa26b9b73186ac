"""Offline consolidation: NREM replay of episodes, threat rehearsal, the curator's dream tags, the staging buffer
and the integration of what a dream found into semantic memory."""
