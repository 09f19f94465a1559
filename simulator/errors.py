"""Errors the simulator reports to users: each names where, what was expected and what was found."""

from __future__ import annotations


class UserError(Exception):
    """Base of every error caused by user input; the CLI prints it as one line."""

    def __init__(self, where: str, expected: str, found: str):
        self.where, self.expected, self.found = where, expected, found
        super().__init__(f"{where}: expected {expected}, found {found}")


class TraceError(UserError):
    """A trace file that simrd's parser would not accept."""

    def __init__(self, source: str, line: int, expected: str, found: str):
        self.source, self.line = source, line
        super().__init__(f"{source}:{line}" if line else source, expected, found)


class PolicyError(UserError):
    """An unknown policy name or kernel rule id, or a parameter outside its documented range."""
