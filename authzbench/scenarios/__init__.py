"""Workload definitions (catalog) and the runner that executes them."""
