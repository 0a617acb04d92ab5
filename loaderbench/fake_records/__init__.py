"""Fake records in the real schema, one home for tests and the scale benchmark: whole studies with realistic
throughput (studies) and small tables per question with the effect sizes a test asks for (questions)."""
