"""The clade: golems of one owner that share a pheromone field (docs/design/pheromones.md)."""
