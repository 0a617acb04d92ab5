"""docs/findings.md and the shipped reference records: the page and its check (page), its generated blocks
(blocks, and the modules they share: common, gpu, shm, threads, checkpointing), the reference folders' README
(reference_records), how each study was measured (provenance) and the verdicts of earlier renderings
(verdict_history)."""
