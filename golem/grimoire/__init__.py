"""The Grimoire, the golem's memory, in rooms: store/ (what both stores share) under episodes/ and semantic/, then
playbook/ and dreams/. decay.py and regimes.py are the vocabulary every room uses; retrieval, access, transfer,
upkeep and integrity work across the rooms."""
