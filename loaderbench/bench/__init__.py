"""`python -m loaderbench.bench` (`make bench`): the benchmarks and checks of the suite itself.

A benchmark suite is judged by numbers of its own: how much it disturbs what it measures, how long it takes
to give an answer of a given precision, whether its window reads what a bare loop reads, and whether its
intervals hold the confidence they state. One module per experiment, each measuring and returning a plain
dict; `render` draws them; `cli` runs them in order and writes one JSON file:

  overhead         1. harness overhead: the loop alone (ns per batch) and in a real cell (ABAB windows,
                      `abab` runs inside the cell; the probe is switched from outside)
  precision        2. precision per second spent: adaptive cells through the real runner
  window_bias      3. the measuring window against a bare DataLoader loop, on one core
  coverage         4. real coverage of the adaptive stopping rule on synthetic streams
  time_to_answer   5. the suite end to end against one fresh process per run (`script`)
  scale            6. analysis at scale (`python -m loaderbench.analysis.stage_costs --json FILE`)
  tune_vs_grid     7. `loaderbench tune` against the full grid on the same matrices, in the same run
  rerun_agreement  8. a study run twice: how many of its cells agree
  doctor_hooks     9. what the doctor's watch costs a loop that only loads

Helpers: `common` (throwaway cells, load averages, strict JSON), `fork` (a forked child whose dict result
comes back through `loaderbench.processes.ResultChannel`). Intervals come from `loaderbench.analysis.table.summary`
(paired
bootstraps of ratios of sums) and `loaderbench.stats.intervals` (order-statistic intervals of medians).
"""
