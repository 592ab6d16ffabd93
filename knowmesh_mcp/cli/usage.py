"""The one error every command may raise on its own: bad input it detected itself."""


class UsageError(Exception):
    """Bad input detected by the command itself: exit 2."""
