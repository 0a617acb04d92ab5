"""What every question's rules share: the Claim and Question records and the noise guard (claim), the numbered
catalogue of claims (catalogue), how one study measured on several machines is named (machines), and the rules some
questions share (worker_costs, step_overlap)."""
