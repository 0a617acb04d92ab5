"""Statistics with stated confidence: distribution-free intervals, verdicts, comparisons and the adaptive
stopping rule. Arrays in, numbers out: imports neither torch nor pandas."""
