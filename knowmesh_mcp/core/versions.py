"""Version ranges: a runtime's `Constraint` (PEP 440 specifier text such as ``>=3.8,<3.12``) as
disjoint intervals, so two ranges are known to overlap (``python>=3.8,<3.12`` and
``python>=3.11`` do) by interval arithmetic rather than by probing sample versions, and a
machine's imprecise version (``3.12``) stands for its prefix.

Depends on `packaging` only; `environment` reads runtime tags into these constraints.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from packaging.specifiers import InvalidSpecifier, Specifier
from packaging.version import InvalidVersion, Version


@dataclass(frozen=True)
class _Interval:
    """A range of versions; a None bound is unbounded."""

    low: Version | None
    low_closed: bool
    high: Version | None
    high_closed: bool

    def is_empty(self) -> bool:
        if self.low is None or self.high is None or self.low < self.high:
            return False
        return not (self.low == self.high and self.low_closed and self.high_closed)

    def intersect(self, other: _Interval) -> _Interval:
        low, low_closed = self.low, self.low_closed
        if other.low is not None and (low is None or other.low > low):
            low, low_closed = other.low, other.low_closed
        elif other.low is not None and other.low == low:
            low_closed = low_closed and other.low_closed
        high, high_closed = self.high, self.high_closed
        if other.high is not None and (high is None or other.high < high):
            high, high_closed = other.high, other.high_closed
        elif other.high is not None and other.high == high:
            high_closed = high_closed and other.high_closed
        return _Interval(low, low_closed, high, high_closed)


_EVERY_VERSION = (_Interval(None, False, None, False),)


def _after_prefix(version: Version, length: int) -> Version:
    """The first version past every ``X.Y.*`` for the first `length` release parts: 3.12 -> 3.13."""
    prefix = version.release[:length]
    text = ".".join(map(str, (*prefix[:-1], prefix[-1] + 1)))
    return Version(f"{version.epoch}!{text}" if version.epoch else text)


def _prefix_range(version: Version) -> _Interval:
    return _Interval(version, True, _after_prefix(version, len(version.release)), False)


def _specifier_intervals(spec: Specifier) -> tuple[_Interval, ...]:
    """Translate one PEP 440 specifier into disjoint intervals (pre-release subtleties ignored)."""
    operator, text = spec.operator, spec.version
    if text.endswith(".*"):
        prefix = _prefix_range(Version(text[:-2]))
        if operator == "==":
            return (prefix,)
        return (_Interval(None, False, prefix.low, False), _Interval(prefix.high, True, None, False))
    version = Version(text)
    if operator == ">=":
        return (_Interval(version, True, None, False),)
    if operator == ">":
        return (_Interval(version, False, None, False),)
    if operator == "<=":
        return (_Interval(None, False, version, True),)
    if operator == "<":
        return (_Interval(None, False, version, False),)
    if operator == "!=":
        return (_Interval(None, False, version, False), _Interval(version, False, None, False))
    if operator == "~=":  # ~=3.10 -> >=3.10,<4 ; ~=3.10.2 -> >=3.10.2,<3.11
        return (_Interval(version, True, _after_prefix(version, len(version.release) - 1), False),)
    return (_Interval(version, True, version, True),)  # == and ===


def _intersect_all(a: Iterable[_Interval], b: Iterable[_Interval]) -> tuple[_Interval, ...]:
    b = tuple(b)
    pieces = (x.intersect(y) for x in a for y in b)
    return tuple(piece for piece in pieces if not piece.is_empty())


@dataclass(frozen=True)
class Constraint:
    """A version range for one runtime, kept as its specifier text (e.g. ``>=3.8,<3.12``).

    Build it with `Constraint.parse`, which validates; the text keeps the author's order so
    error bodies read as written.
    """

    text: str

    @classmethod
    def parse(cls, text: str) -> Constraint | None:
        """A valid constraint, or None when any part is not a PEP 440 specifier with a version."""
        parts = [part for part in re.sub(r"\s+", "", text).split(",") if part]
        if not parts:
            return None
        try:
            specifiers = [Specifier(part) for part in parts]
            for spec in specifiers:
                _specifier_intervals(spec)  # rejects "===foo" and other non-versions
        except (InvalidSpecifier, InvalidVersion, IndexError):
            return None
        return cls(",".join(str(spec) for spec in specifiers))

    @cached_property
    def intervals(self) -> tuple[_Interval, ...]:
        result: tuple[_Interval, ...] = _EVERY_VERSION
        for part in self.text.split(","):
            result = _intersect_all(result, _specifier_intervals(Specifier(part)))
        return result

    def __and__(self, other: Constraint) -> Constraint:
        return Constraint(f"{self.text},{other.text}")

    def intersects(self, other: Constraint) -> bool:
        return bool(_intersect_all(self.intervals, other.intervals))

    def allows(self, version: str | None) -> bool | None:
        """Whether a machine's version can satisfy this; None when the version is unknown.

        A version with fewer than three release parts is imprecise, so it stands for its
        prefix: ``3.12`` allows ``>=3.12.4`` (some 3.12 does). Three or more parts are exact.
        """
        if version is None:
            return None
        try:
            parsed = Version(version)
        except InvalidVersion:
            return None
        if len(parsed.release) < 3:
            machine = _prefix_range(parsed)
        else:
            machine = _Interval(parsed, True, parsed, True)
        return bool(_intersect_all(self.intervals, (machine,)))
