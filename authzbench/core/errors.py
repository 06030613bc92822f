"""Errors the user can act on. The CLI prints them as one line and exits with code 2."""


class UserError(Exception):
    """Bad input or an unusable environment: printed as one line, exit code 2, no traceback."""


class BackendUnavailable(UserError):
    """A backend cannot run here (missing driver, Java, Go, server unreachable)."""
