"""The schema layer (docs/ARCHITECTURE.md)."""
