"""Exceptions raised by the pipefill package."""

from __future__ import annotations

from typing import Iterable


class CompileError(ValueError):
    """The compiler rejected a JobSpec (or a profile given with it).

    ``str(error)`` starts with a one-line summary followed by every error as the
    command-line tools print it: ``file:line:col: error: message`` and the
    offending source line. ``diagnostics`` holds those errors one per item.
    """

    def __init__(self, message: str, diagnostics: Iterable[str] = ()) -> None:
        super().__init__(message)
        self.diagnostics: list[str] = list(diagnostics)


class RunError(RuntimeError):
    """The runtime (pfrt) refused a stream program or failed while running it.

    ``status`` is the pfrt status name, e.g. ``"PFRT_ERROR_INVALID_PROGRAM"``.
    """

    def __init__(self, message: str, status: str = "") -> None:
        super().__init__(message)
        self.status: str = status
