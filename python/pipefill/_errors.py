"""Exceptions raised by the pipefill package."""

from __future__ import annotations

import os
from typing import Any, Iterable, Optional


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
    ``bubble_result``: from a bubble's end that failed (a fill task failed in the
    bubble, which still ended), what the end returns otherwise; else ``None``.
    """

    def __init__(self, message: str, status: str = "") -> None:
        super().__init__(message)
        self.status: str = status
        self.bubble_result: Optional[dict[str, Any]] = None


def _looks_like_path(text: str) -> bool:
    s = text.strip()
    return (bool(s) and "\n" not in s and "{" not in s and len(s) < 4096
            and (s.endswith((".pbtxt", ".txt", ".csv", ".pb")) or os.path.isfile(s)))


def with_path_hint(error: CompileError, text: str, what: str, instead: str) -> CompileError:
    """``error`` again, with a hint when the rejected ``str`` was probably meant as a file name.

    A ``str`` is always text (``what``: "JobSpec", "schedule table"); "job.pbtxt" parsed as a
    JobSpec gives a syntax error that does not say so.
    """
    if not _looks_like_path(text):
        return error
    name = text.strip()
    return CompileError(
        f"{error}\nhint: a str is {what} text, and {name!r} looks like a file name: "
        f"pass pathlib.Path({name!r}){instead}",
        error.diagnostics,
    )
