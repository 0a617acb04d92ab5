"""Why a submitted cell repetition's Slurm job ended without a record: Slurm's final state and its reason (squeue
keeps a finished job for MinJobAge, accounting for longer), and the error its stderr log ends with, which names what
failed when the job died before its cell started (srun's "Task launch ... failed on node ...", a lost node).

A job Slurm ended (FAILED, NODE_FAIL, BOOT_FAIL, OUT_OF_MEMORY, TIMEOUT, ...) counts as failed; one a user cancelled,
or one Slurm no longer knows and whose log says nothing, as lost. Either way `make submit` runs it again: it has no
record and is no longer pending or running.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from submitit.core.utils import JobPaths

#: states in which Slurm did not end the job itself: a user cancelled it, or a federation revoked it
NOT_FAILED = ("CANCELLED", "REVOKED")
#: how much of the end of a job's stderr log is read for its last error
LOG_TAIL_BYTES = 64 * 1024
LOST = "ended without a record (cancelled, node failure or preempted without requeue)"


@dataclass(frozen=True)
class JobEnd:
    state: str  # Slurm's final state ("" when Slurm no longer knows the job)
    reason: str  # Slurm's reason for it (squeue's %r, e.g. NonZeroExitCode; "" when none)
    log_error: str  # the last error line of the job's stderr log ("" when none)

    @property
    def failed(self) -> bool:
        """Slurm ended it, or its log says what failed; not a cancelled or forgotten job."""
        if self.state:
            return not self.state.startswith(NOT_FAILED)
        return bool(self.log_error)

    def describe(self) -> str:
        """One line: Slurm's state (reason), then the log's error."""
        parts = []
        if self.state:
            reason = f" ({self.reason})" if self.reason and self.reason != "None" else ""
            parts.append(f"Slurm: {self.state}{reason}")
        if self.log_error:
            parts.append(self.log_error)
        return "; ".join(parts) or LOST


def log_error(logs: str | Path | None, job_id: str, width: int = 240) -> str:
    """The error line of the stderr log submitit kept for `job_id` (its first task's, where the batch script's own
    stderr, srun's messages included, also goes); "" when there is none."""
    if not logs:
        return ""
    path = JobPaths(logs, job_id=job_id, task_id=0).stderr
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, path.stat().st_size - LOG_TAIL_BYTES))
            tail = fh.read().decode(errors="replace")
    except OSError:
        return ""
    errors = [ln.strip() for ln in tail.splitlines() if "error" in ln.lower()]
    if not errors:
        return ""
    # Slurm's own messages ("srun: error: Task launch for StepId=... failed on node ...") come first, what followed
    # from them after: the first of those, else the last line that mentions an error
    line = next((ln for ln in errors if "error:" in ln), errors[-1])
    return line if len(line) <= width else line[: width - 3] + "..."


def job_end(job_id: str, squeue: tuple[str, str] | None, sacct_state: str | None, logs: str | None) -> JobEnd:
    """How `job_id` ended: squeue's (state, reason) while it still lists the job, else accounting's state; and the
    error its log ends with."""
    state, reason = squeue if squeue else (sacct_state or "", "")
    return JobEnd(state=state, reason=reason, log_error=log_error(logs, job_id))
