"""What every stage exchanges: the axes a study may vary, cells, the result record and the results store.
Pure Python: imports neither torch nor pandas."""
