"""`loaderbench tune STUDY`: the best DataLoader settings of a study's matrix for this node, without measuring
the whole grid at full repetitions.

One job per module:
  options   what a run may be asked (objective, margin, reach, finalists, repetitions, memory cap), validated
  space     the study's cells split into scenarios (the work and the node) and the settings to choose from
  evidence  a candidate's observations and what they say (median, interval with its real coverage)
  search    the strategy of one scenario: screen, refine by the curve's shape, other axes, confirm by
            successive halving on repetitions; it decides only from a `measure` function it is given
  measure   that function for real: an ordinary cell repetition through the ordinary runner, an ordinary
            record of the study `<study>-tune` (read back instead of measured again when it exists)
  result    tune.json
  render    the answer a person can paste (`DataLoader(ds, ...)  # 1,234 samples/s [...]`)
  run       all of it, for the CLI and the Slurm tune job (slurm)
"""
