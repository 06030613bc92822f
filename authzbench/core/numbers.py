"""How a figure reads, written once: the report's tables and sentences, the JSON beside it and the run's own
reasons (a churn step's verdict) print a value the same way, so one figure shows one value wherever it
appears.

One rounding rule: a figure is first cut to the JSON's 6 significant digits (`significant`), then rounded half
up in decimal (`fixed`). Rounding the float directly rounded half to even on its binary value, so the appendix
(reading the JSON's 45,084.5) printed 45,084 where the main report (reading 45,084.52) printed 45,085; four
ranked figures of 20261129-201802 differed so. Cut first, every place prints the JSON's digits."""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal

# The JSON beside a report carries figures to 6 significant digits: the narrowest interval a ranked figure
# has is wider than that, and the last bits of a float differ between hosts (numpy's log on an AMD EPYC
# wrote an exponent ...94580155054 where Intel hosts wrote ...94580155053), so more digits are not the
# measurement's. A host's last-bit difference changes a 6-digit value only on a rounding boundary.
JSON_DIGITS = 6


def significant(v: float | None, digits: int = JSON_DIGITS) -> float | None:
    """v rounded to `digits` significant digits; None and non-finite values as they are."""
    if v is None or not math.isfinite(v) or v == 0:
        return v
    return round(float(v), digits - 1 - math.floor(math.log10(abs(v))))


def _decimal(v: float, places: int) -> Decimal:
    """v as the JSON keeps it, rounded half up to `places` decimals. A whole float (a count summed in a
    frame) is kept whole: 2,345,678 rows is not 2,345,680."""
    kept = v if float(v).is_integer() else significant(v)
    d = Decimal(repr(float(kept))).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    return d.copy_abs() if d == 0 else d  # no "-0.00"


def fixed(v: float, places: int) -> str:
    """v to `places` decimals, thousands separated, by the one rounding rule: fixed(3.155, 2) = "3.16"."""
    return f"{_decimal(v, places):,f}"


def num(v: float) -> str:
    """A figure in prose: 0.127, 1.16, 36.4, 1,316 (three significant digits, thousands separated)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if v == 0:
        return "0"
    if math.isinf(v):
        return "∞"
    s = significant(float(v))
    if abs(s) >= 100:
        return fixed(v, 0)
    d = _decimal(v, 2 - math.floor(math.log10(abs(s))))
    if abs(d) >= 100:  # 99.95 rounds up to 100: printed as a whole number, as three digits are
        return fixed(v, 0)
    text = f"{d:f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def size_text(v: float) -> str:
    """Bytes in the largest binary unit they reach, to one decimal: "1.5 GiB", "812 B"."""
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if abs(v) >= size:
            return f"{v / size:,.1f} {unit}"
    return f"{v:,.0f} B"
