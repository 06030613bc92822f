"""Backends: one module per system, each a small subclass of base.Backend."""
