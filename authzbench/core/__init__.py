"""The core layer (docs/ARCHITECTURE.md)."""
