"""The small helpers more than one adapter needs, written once: the object type and permission a check
names, the first line of a driver's error, a DSN fit to print."""

from __future__ import annotations

import re

from authzbench.core.errors import UserError
from authzbench.schema.model import PERMISSION_TARGETS

# every model's permissions: a lenient lookup (SpiceDB's) names the object type through the permission
_ANY_MODEL = {perm: target for targets in PERMISSION_TARGETS.values() for perm, target in targets.items()}


def permission_target(backend: str, model: str, perm: str, *, strict: bool = True) -> tuple[str, str]:
    """(object type, permission) a check of `perm` reads in `model`: view_content -> (content, view).
    strict: an unknown permission is a UserError; otherwise it is sent as a resource permission and the
    server answers it."""
    if not strict:
        return _ANY_MODEL.get(perm, ("resource", perm))
    try:
        return PERMISSION_TARGETS[model][perm]
    except KeyError:
        raise UserError(f"{backend}: unknown permission {perm!r} for the {model} model") from None


def first_line(e: BaseException, limit: int | None = None) -> str:
    """The error's first non-blank line (libpq puts the reason there, "... failed: Connection refused",
    and a generic hint on the lines after it), at most `limit` characters."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    line = lines[0] if lines else type(e).__name__
    return line[:limit] if limit else line


def public_dsn(dsn: str) -> str:
    """The DSN with its password masked, in URL form and key=value form."""
    dsn = re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", dsn)
    return re.sub(r"(password\s*=\s*)\S+", r"\1***", dsn)
