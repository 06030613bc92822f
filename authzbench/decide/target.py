"""The reader's target: the size, rates and freshness a deployment needs, stated once."""

from __future__ import annotations

from dataclasses import dataclass, field

FRESHNESS = ("any", "bounded", "no-stale")


@dataclass(frozen=True)
class Target:
    relationships: float  # the graph's size, e.g. 20e6
    checks_per_s: float  # peak permission checks per second
    changes_per_s: float  # structural changes per second, in `change_mix`'s shares
    lookups_per_s: float = 0.0  # reverse lookups per second; 0: not a need
    freshness: str = "any"  # one of FRESHNESS
    freshness_s: float | None = None  # with "bounded": how stale an answer may be, seconds
    check_p95_ms: float = 25.0  # the check SLO the churn envelope already judges steps by
    change_mix: dict[str, float] = field(default_factory=lambda: {"membership": 1.0})  # shares, sum 1

    @property
    def freshness_label(self) -> str:
        return f"bounded:{self.freshness_s:g}" if self.freshness == "bounded" else self.freshness
