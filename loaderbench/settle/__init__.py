"""`loaderbench settle STUDY`: measure more repetitions of only the cells that the study's undecided claims read,
round after round in interleaved order, until every claim it can settle is decided or the time budget is spent.

`needs` finds what is open and what it reads; `rounds` measures (each round a fresh `loaderbench run` process, so
the cells are forked from a process with no analysis loaded) and writes the report.
"""
