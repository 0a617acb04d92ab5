"""Launchers: run a study's pending cell repetitions here (local) or as Slurm job arrays (slurm)."""
