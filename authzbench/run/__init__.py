"""The run layer (docs/ARCHITECTURE.md)."""
