"""The self-contained report (page, its layout and tables), the rules of thumb and recommendations it states
(recommend), and the comparison of two runs (compare_runs)."""
