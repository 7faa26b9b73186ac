"""What the episode and semantic stores share: the embedders and the identity each vector carries, the LanceDB
session, indexes and mirror table, and the write pause (see docs/concepts/grimoire.md)."""
