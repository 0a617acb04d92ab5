"""The records as one tidy table (records), the columns derived from it (derive), per-cell statistics and the
summary table (summary), each study's scaling analysis (scaling, usl), the machine and software the records name
(environment), and the version of the code the outputs are made of (code_version)."""
