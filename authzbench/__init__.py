"""authzbench: benchmark relationship-based authorization across storage backends."""

__version__ = "0.1.0"
