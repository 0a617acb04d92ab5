"""Measuring one cell repetition: the runner forks a fresh process, the cell process builds the loader and runs
the measuring loop, probes watch it from outside, and what happened becomes one record. Never imports the
analysis."""
