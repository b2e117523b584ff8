"""Errors that the CLI turns into one-line messages and exit codes (see docs/CLI.md).

Exit codes: 0 success; 1 bad input data; 2 bad usage or a bad model file; 130/143 interrupted.
"""

from __future__ import annotations


class LomtreeError(Exception):
    """Base class of every error lomtree reports to the user as one line."""

    exit_code = 1


class InputError(LomtreeError):
    """A malformed input line: reported as ``file:line: reason``.

    Parameters
    ----------
    source : name of the input (file path, or ``<stdin>``)
    line : 1-based line number in that input (0 when not known)
    reason : short machine id (``label_int``, ``feat_value``, ...; docs/ALGORITHMS.md §1.2)
    detail : human text
    column : 1-based byte column of the problem (0 when not known)
    """

    exit_code = 1

    def __init__(self, source: str, line: int, reason: str, detail: str = "", column: int = 0):
        self.source = source
        self.line = int(line)
        self.reason = reason
        self.detail = detail or reason
        self.column = int(column)
        super().__init__(self.message())

    def message(self) -> str:
        col = f" (column {self.column})" if self.column else ""
        if self.line <= 0:  # about the whole input (cannot open, corrupt compressed stream)
            return f"{self.source}: {self.detail}{col}"
        return f"{self.source}:{self.line}: {self.detail}{col}"


class ModelFormatError(LomtreeError):
    """A model file that is missing, truncated, corrupt or of another format version."""

    exit_code = 2


class ConfigError(LomtreeError):
    """Bad usage: conflicting or invalid options."""

    exit_code = 2


class Interrupted(Exception):
    """Raised after a clean stop on SIGINT/SIGTERM; ``exit_code`` is 130 or 143."""

    def __init__(self, signum: int, summary: dict):
        self.signum = signum
        self.summary = summary
        self.exit_code = 128 + signum
        super().__init__(f"interrupted by signal {signum}")
