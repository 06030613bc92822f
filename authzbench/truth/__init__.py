"""The truth layer (docs/ARCHITECTURE.md)."""
