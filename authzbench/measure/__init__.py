"""The measurement (docs/ARCHITECTURE.md): the runner, its workers and pools, the one timing of an op."""
