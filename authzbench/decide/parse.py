"""The target from the command line, checked before anything starts: each option's own value (cli.py's
argparse types), then whether the suite has a basis for it at all (a lookup rate where no chosen backend can
measure a lookup, a size further than a projection from the profiles can carry). Bad input is a UserError:
one line on stderr, exit code 2."""

from __future__ import annotations

import argparse

from authzbench.core.errors import UserError
from authzbench.decide.target import FRESHNESS, Target

# The change kinds a target's mix may name: the churn sweep's structural writes (workloads/churn.py). A
# revocation is part of every grant's op (each grant is revoked once it was seen), not a kind of its own.
MIX_KINDS = ("membership", "hierarchy")
DEFAULT_MIX = {"membership": 1.0}
# How far past the largest profile a projection may reach: one decade. The committed size sweep's own check
# of the method (each size from the third projected from the smaller ones) spans one decade per step; beyond
# that a target has no basis here.
PROJECTION_REACH = 10.0


def freshness(s: str) -> tuple[str, float | None]:
    """argparse type: any | no-stale | bounded:SECONDS."""
    mode, sep, secs = s.strip().partition(":")
    if mode not in FRESHNESS or (mode == "bounded") != bool(sep):
        raise argparse.ArgumentTypeError(f"expected any, no-stale or bounded:SECONDS, got {s!r}")
    if mode != "bounded":
        return mode, None
    try:
        v = float(secs)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bounded:SECONDS needs a number of seconds, got {s!r}") from None
    if not 0 < v < float("inf"):
        raise argparse.ArgumentTypeError(f"bounded:SECONDS must be > 0 s, got {s!r}")
    return mode, v


def mix(s: str) -> dict[str, float]:
    """argparse type: membership=0.8,hierarchy=0.2 (shares of the kinds in MIX_KINDS, summing to 1)."""
    out: dict[str, float] = {}
    for part in s.split(","):
        kind, sep, share = part.strip().partition("=")
        if not sep or kind not in MIX_KINDS or kind in out:
            raise argparse.ArgumentTypeError(
                f"expected KIND=SHARE,... with KIND one of {', '.join(MIX_KINDS)} (each once), got {s!r}")
        try:
            out[kind] = float(share)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{kind}: expected a share, got {share!r}") from None
        if not 0 < out[kind] <= 1:
            raise argparse.ArgumentTypeError(f"{kind}: a share is in (0, 1], got {share}")
    if abs(sum(out.values()) - 1) > 1e-6:
        raise argparse.ArgumentTypeError(f"the shares must sum to 1, got {sum(out.values()):g} in {s!r}")
    return out


def target_of(args: argparse.Namespace) -> Target:
    mode, secs = args.freshness
    return Target(relationships=args.relationships, checks_per_s=args.checks, changes_per_s=args.changes,
                  lookups_per_s=args.lookups, freshness=mode, freshness_s=secs,
                  check_p95_ms=args.check_p95_ms,
                  change_mix=dict(args.change_mix or DEFAULT_MIX))


def check_basis(target: Target, backends: list[str], largest: float, offers_lookups) -> None:
    """UserError when the run could not measure or project what the target asks: `largest` is the largest
    profile's size; offers_lookups(name) says whether a backend has a reverse lookup."""
    if target.relationships > PROJECTION_REACH * largest:
        raise UserError(
            f"--relationships {target.relationships:,.0f}: no basis: the largest profile holds "
            f"~{largest:,.0f} and a projection reaches at most {PROJECTION_REACH:g}x past it")
    if target.lookups_per_s > 0 and not any(offers_lookups(b) for b in backends):
        raise UserError(
            f"--lookups {target.lookups_per_s:g}: no basis: none of {', '.join(backends)} measures a "
            "reverse lookup")
