"""LangGraph's ``ttl`` mapped onto rotifer's retention where it means the same.

LangGraph's ttl is minutes from the last write, extended by reads when
``refresh_on_read`` (its default); rotifer's retention is whole days from the
last write, never extended by a read.  The two agree exactly when the ttl is a
whole number of days and reads do not refresh it, so that is what is taken:

- the store is built with ``ttl={"refresh_on_read": False, ...}`` (a store
  without it, or with ``refresh_on_read`` true, refuses every ttl);
- a put's ttl (or the config's ``default_ttl``) is a positive multiple of
  1440 minutes: the item's entry gets ``{"maxRetentionDays": ttl / 1440,
  "autoDeleteOnTermination": false, "anonymizationSupported": false}`` in
  place of its namespace's retention;
- a read asking to refresh (``refresh_ttl=True``) is refused;
- ``sweep_interval_minutes`` has nothing to do: the memory removes what has
  expired before every call (audited ``expire``).

Anything else raises ``NotImplementedError`` saying why, before anything is
read or written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rotifer.memory.model import RetentionPolicy, parse_retention

MINUTES_A_DAY = 24 * 60

REFUSED = (
    "rotifer's LangGraph store takes ttl= only as whole days that reads do not extend: "
    "build it with ttl={'refresh_on_read': False} and give ttl in multiples of 1440 "
    "minutes (rotifer keeps an entry for whole days from its last write; a read never "
    "extends it). Otherwise give the namespace a retention policy "
    "(NamespacePolicy(retention=...)), or put with ttl=None")


def check_config(config: Mapping[str, Any] | None) -> None:
    """Refuse a ``ttl=`` store configuration rotifer cannot keep exactly."""
    if config is None:
        return
    if not isinstance(config, Mapping):
        raise ValueError("ttl= takes LangGraph's TTLConfig (a dict)")
    if config.get("refresh_on_read", True) is not False:
        raise NotImplementedError(
            "ttl={'refresh_on_read': True} (LangGraph's default) cannot be kept: a read "
            "never extends a rotifer entry's retention. " + REFUSED)
    default = config.get("default_ttl")
    if default is not None:
        retention(default)


def retention(ttl: object) -> RetentionPolicy:
    """The retention policy a ttl of whole days is; NotImplementedError otherwise."""
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or ttl <= 0 \
            or ttl % MINUTES_A_DAY != 0:
        raise NotImplementedError(f"ttl={ttl!r} minutes is not a whole number of days. "
                                  + REFUSED)
    parsed = parse_retention({"maxRetentionDays": int(ttl // MINUTES_A_DAY),
                              "autoDeleteOnTermination": False,
                              "anonymizationSupported": False})
    assert parsed is not None
    return parsed
