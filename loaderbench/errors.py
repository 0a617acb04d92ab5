"""The errors the suite reports to a user: each one means bad input or a missing prerequisite, and its message
names the file, the key and what is allowed (or what to do). The CLI prints any of them as one line and
exits with status 2; anything else is a bug and keeps its traceback."""

from __future__ import annotations


class LoaderbenchError(Exception):
    """Base of every user-facing error."""


class StudyError(LoaderbenchError):
    """A study file that cannot run."""


class ProfileError(StudyError):
    """A cluster profile that cannot be used."""


class DatasetError(LoaderbenchError):
    """A dataset that cannot be generated, found or verified."""


class FactoryError(StudyError):
    """A `custom` workload's factory that cannot be found, imported, called, or returns no dataset."""


class ToolMissing(LoaderbenchError):
    """A program the study's cells need here (nginx, ip, tc) is not installed, or cannot be used by this user."""
