"""Which checkpointing settings a cell may combine: checked when a study is loaded, before anything runs, with
messages that name the axis, the value and what is allowed."""

from __future__ import annotations


def checkpoint_problems(cells) -> list[str]:
    """One sentence per impossible combination among the (normalised) cells, each said once."""
    problems: dict[str, None] = {}
    for cell in cells:
        c = cell.config
        if not c.get("resume_at"):
            continue
        if not c.get("snapshot_every_n_steps"):
            problems[
                f"[matrix] resume_at = {c['resume_at']} with snapshot_every_n_steps = 0: the plain DataLoader has "
                f"no state to resume from; allowed: snapshot_every_n_steps >= 1 with resume_at (add an [[exclude]] "
                f"for snapshot_every_n_steps = 0 and resume_at != 0)"
            ] = None
        if c.get("ranks", 1) > 1:
            problems[
                f"[matrix] resume_at = {c['resume_at']} with ranks = {c['ranks']}: a resume is measured in one "
                f"loader process; allowed: ranks = 1 with resume_at"
            ] = None
        if c.get("target_precision"):
            problems[
                f"[study] target_precision with resume_at = {c['resume_at']}: the resumed epoch is checked against "
                f"a whole uninterrupted one; allowed: no target_precision with resume_at"
            ] = None
    return list(problems)
