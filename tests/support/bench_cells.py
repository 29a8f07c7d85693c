"""Reading `streamkeep bench`'s printed cells back: a number as printed, and a row's ops/s and
us/op checked as the one rate they both print. Must not touch: the bench itself."""

from __future__ import annotations


def number(text: str) -> float:
    return float(text.replace(",", ""))


def rounding(text: str) -> float:
    """Half a unit of a printed number's last digit: how far it may be from what it rounds."""
    decimals = len(text.partition(".")[2])
    return 0.5 * 10.0 ** -decimals


def assert_same_rate(rate_text: str, us_text: str) -> None:
    """A row's ops/s and us/op cells print one rate, each rounded to its own last digit: the
    us/op the exact rate gives lies within what the ends of the rate's rounding give, widened
    by the us/op cell's own rounding (no other slack: the same number, printed twice)."""
    rate, us = number(rate_text), number(us_text)
    half_rate, half_us = rounding(rate_text), rounding(us_text)
    assert 1e6 / (rate + half_rate) - half_us <= us <= 1e6 / (rate - half_rate) + half_us, \
        (rate_text, us_text)
