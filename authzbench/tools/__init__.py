"""One-off measurements behind a design choice, each runnable as `python -m authzbench.tools.NAME`."""
