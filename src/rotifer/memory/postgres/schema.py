"""The tables, created on first use and checked on every open."""

from __future__ import annotations

from typing import Final

from ..model import Category, Scope, SharePolicy

SCHEMA_VERSION: Final = 1

_CATEGORIES = ", ".join(f"'{c.value}'" for c in Category)
_SCOPES = ", ".join(f"'{s.value}'" for s in Scope)
_SHARES = ", ".join(f"'{s.value}'" for s in SharePolicy)

SCHEMA: Final = f"""
CREATE TABLE IF NOT EXISTS memory_meta (
    name text PRIMARY KEY,
    value text NOT NULL
);
CREATE TABLE IF NOT EXISTS memory_agents (
    agent_id text COLLATE "C" PRIMARY KEY,
    quota_bytes bigint NOT NULL CHECK (quota_bytes > 0),
    max_retention_days integer,
    anonymization_supported boolean NOT NULL,
    used_bytes bigint NOT NULL CHECK (used_bytes >= 0),
    next_seq bigint NOT NULL,
    -- The store checks the quota, and this keeps a bug from committing past it.
    CHECK (used_bytes <= quota_bytes)
);
CREATE TABLE IF NOT EXISTS memory_entries (
    agent_id text COLLATE "C" NOT NULL REFERENCES memory_agents (agent_id),
    key text COLLATE "C" NOT NULL,
    category text NOT NULL CHECK (category IN ({_CATEGORIES})),
    value bytea NOT NULL,
    size bigint NOT NULL,
    created_by text NOT NULL,
    creator_domain text,
    last_accessed_by text NOT NULL,
    created_us bigint NOT NULL,
    updated_us bigint NOT NULL,
    read_scope text NOT NULL CHECK (read_scope IN ({_SCOPES})),
    write_scope text NOT NULL CHECK (write_scope IN ({_SCOPES})),
    share_policy text NOT NULL CHECK (share_policy IN ({_SHARES})),
    retention jsonb,
    expires_us bigint,
    seq bigint NOT NULL,
    PRIMARY KEY (agent_id, key)
);
CREATE INDEX IF NOT EXISTS memory_entries_cleanup
    ON memory_entries (agent_id, category, updated_us, seq);
CREATE INDEX IF NOT EXISTS memory_entries_recent
    ON memory_entries (agent_id, updated_us, seq);
CREATE INDEX IF NOT EXISTS memory_entries_expiry
    ON memory_entries (agent_id, expires_us, seq) WHERE expires_us IS NOT NULL;
"""
