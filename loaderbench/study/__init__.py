"""Before anything runs: a study file loaded and validated into cells, which repetitions are pending, how long
they will take, and the cluster profiles they may run under. Imports no torch."""
