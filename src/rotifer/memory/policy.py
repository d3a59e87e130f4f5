"""The access rules of the Memory API, written once for every backend.

These are pure functions of the entry's stored policy, its creator and the
gene asking; the store calls them before every read, write and delete.
"""

from __future__ import annotations

from dataclasses import dataclass

from .clock import MICROS_PER_DAY
from .errors import AgentMemoryError, denied
from .model import AccessPolicy, DataPolicy, RetentionPolicy, Scope, SharePolicy

#: Expiry times are clamped here; 2**31 days is far past anything a clock reaches.
NEVER_US = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Actor:
    """A gene acting on memory: its v2 id and functional domain."""

    gene_id: str
    domain: str | None


def scope_allows(scope: Scope, actor: Actor, creator: str, creator_domain: str | None) -> bool:
    """Does ``scope`` let ``actor`` in on an entry created by ``creator``?"""
    if scope is Scope.ALL_GENES:
        return True
    if scope is Scope.CREATOR_GENE_ONLY:
        return actor.gene_id == creator
    if scope is Scope.SAME_DOMAIN:
        # A gene is always in its own domain, even one that declares none.
        return actor.gene_id == creator or (
            actor.domain is not None and actor.domain == creator_domain
        )
    # DEPLOYER_CONFIGURED: the data policy has no setting for it yet, so never.
    return False


def check_fits_data_policy(
    access: AccessPolicy, retention: RetentionPolicy | None, data: DataPolicy
) -> AgentMemoryError | None:
    """The refusal a write with these policies gets under ``data``, if any."""
    if Scope.DEPLOYER_CONFIGURED in (access.read_scope, access.write_scope):
        return denied(
            "DEPLOYER_CONFIGURED scopes cannot be set: the agent's data policy has no "
            "setting for them in this release"
        )
    if access.share_policy is not SharePolicy.PRIVATE and not data.anonymization_supported:
        return denied(
            f"sharePolicy {access.share_policy.value} needs a data policy that supports "
            "anonymization; this agent's does not"
        )
    if retention is not None and data.max_retention_days is not None:
        days = retention.max_retention_days
        if days is None or days > data.max_retention_days:
            kept = "forever" if days is None else f"{days} days"
            return denied(
                f"retentionPolicy keeps the entry {kept}, longer than the agent's data policy "
                f"allows ({data.max_retention_days} days)"
            )
    return None


def expires_at(updated_us: int, retention: RetentionPolicy | None, data: DataPolicy) -> int | None:
    """When an entry written at ``updated_us`` expires, or ``None`` for never."""
    days = data.max_retention_days if retention is None else retention.max_retention_days
    if days is None:
        return None
    return min(updated_us + days * MICROS_PER_DAY, NEVER_US)
