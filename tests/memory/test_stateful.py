"""Property-based test of the memory store against a reference model (issue 2).

A hypothesis state machine runs random operation sequences -- writes, reads,
queries and deletes by several genes in two domains (and one gene without a v2
id), deployer lists and deletes, a moving clock, invalid inputs -- on two
agents with small quotas and different data policies, against the real store
(a real SQLite file in a fresh temporary directory) and against
:mod:`tests.memory.model`, which is written straight from the seed.  After
every step it compares the returned entries field by field, every error code,
the bytes in use and the new lines of ``.rotifer/audit.jsonl``.

``TwinStoreMachine`` does the same with two store objects opened on one
database (two "processes" in one thread), picking one of them for every call,
so each must see what the other wrote.

Both machines run on each backend: SQLite (``TestMemoryStateful``,
``TestTwinStores``) and the real PostgreSQL server of ``tests/pg_plugin.py``
(``test_stateful_on_postgres``), where every example gets a new, empty schema
so examples never see each other's rows.  PostgreSQL runs fewer examples
(``ROTIFER_STATEFUL_PG_EXAMPLES``, ``ROTIFER_STATEFUL_PG_TWIN_EXAMPLES``): each
step is a few network round trips instead of a local file write.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from rotifer.memory import (
    UNSET,
    AccessPolicy,
    AgentMemoryError,
    Category,
    DataPolicy,
    ManualClock,
    MemoryEntry,
    MemoryFilter,
    MemoryStore,
    RetentionPolicy,
    Scope,
    SharePolicy,
)

from .conftest import SchemaMaker
from .model import ANY, UNSET_, Gene, Model, ModelError, fmt_time, parse_rfc3339

START = "2026-03-01T00:00:00Z"
AGENTS = ("agent-a", "agent-b")


def _v2(name: str) -> str:
    return "v2:" + hashlib.sha256(name.encode()).hexdigest()


#: Four genes with v2 ids in two domains, and one that was never wrapped.
GENES = (
    Gene(_v2("fmt-1"), "formatter"),
    Gene(_v2("fmt-2"), "formatter"),
    Gene(_v2("net-1"), "network"),
    Gene(_v2("net-2"), "network"),
    Gene(None, "formatter"),
)
GENE_PICK = st.sampled_from((0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4))
AGENT_PICK = st.sampled_from(("agent-a", "agent-a", "agent-a", "agent-b"))
#: Odd: pick a key the model holds (when there is one); even: one from the pool.
EXISTING = st.integers(0, 15)
#: Values of a few sizes, so the small quotas fill and cleanup has to run.
VALUE = st.builds(lambda size, fill: bytes([fill]) * size,
                  st.sampled_from((0, 1, 4, 8, 16, 30, 60, 100, 150, 190)), st.integers(0, 255))
#: A query bound: none, a live entry's updatedAt, or hours from now.
BOUND = st.sampled_from(("none",) * 12 + ("entry",) * 3 + ("0", "-1", "-24", "1"))
FILL_VALUE = st.builds(lambda size, fill: bytes([fill]) * size,
                       st.sampled_from((4, 10, 20, 40, 70, 100)), st.integers(0, 255))

#: Keys that are prefixes of each other, with LIKE wildcards and multi-byte UTF-8.
KEYS = ("a", "a/b", "a/b/c", "a/c", "a_b", "a%", "ab", "b", "formatter/indent", "é", "é/x")
PREFIXES = ("", "a", "a/", "a/b", "a_", "a%", "b", "é", "formatter/", "z", "a\x00", "\udc80")
CATEGORIES = tuple(c.value for c in Category)

# Scopes weighted towards the ones that let writes through.
SCOPE_PICK = st.sampled_from(("SAME_DOMAIN",) * 3 + ("ALL_GENES",) * 3
                             + ("CREATOR_GENE_ONLY",) * 3 + ("DEPLOYER_CONFIGURED",))
SHARE_PICK = st.sampled_from(("PRIVATE",) * 6 + ("ANONYMIZED_SHARE", "KNOWLEDGE_GENE"))
ACCESS = st.one_of(
    st.none(), st.none(), st.none(), st.none(),
    st.fixed_dictionaries({"readScope": SCOPE_PICK, "writeScope": SCOPE_PICK,
                           "sharePolicy": SHARE_PICK}),
)
RETENTION = st.one_of(
    st.just(UNSET_), st.just(UNSET_), st.just(UNSET_), st.just(UNSET_), st.none(),
    st.fixed_dictionaries({
        "maxRetentionDays": st.sampled_from((1, 2, 3, 5, None)),
        "autoDeleteOnTermination": st.booleans(),
        "anonymizationSupported": st.booleans(),
    }),
)
DATA_POLICIES = (
    None,  # the default: no limit, no anonymization
    {"maxRetentionDays": 3, "anonymizationSupported": True},
    {"maxRetentionDays": None, "anonymizationSupported": True},
)
HOUR_US = 3600 * 1_000_000
#: Clock steps: a second, hours, days (all whole seconds, so expiry "to the second"
#: needs no rounding); 0 lets several writes share a timestamp.
ADVANCES = (0, 1_000_000, HOUR_US, HOUR_US, 6 * HOUR_US, 24 * HOUR_US, 24 * HOUR_US,
            2 * 24 * HOUR_US, 3 * 24 * HOUR_US, 10 * 24 * HOUR_US)

#: Inputs the spec says are MEMORY_INVALID_INPUT.
BAD_KEYS = ("", "a\0b", "k" * 1025, "é" * 513, 7)
BAD_CATEGORIES = ("cache", "Preference", "UNKNOWN", "")
BAD_RETENTION = (
    {"maxRetentionDays": 0, "autoDeleteOnTermination": False, "anonymizationSupported": False},
    {"maxRetentionDays": 2_147_483_648, "autoDeleteOnTermination": False,
     "anonymizationSupported": False},
    {"maxRetentionDays": 1.5, "autoDeleteOnTermination": False, "anonymizationSupported": False},
    {"maxRetentionDays": True, "autoDeleteOnTermination": False, "anonymizationSupported": False},
    {"maxRetentionDays": "1", "autoDeleteOnTermination": False, "anonymizationSupported": False},
    {"maxRetentionDays": 1, "autoDeleteOnTermination": "no", "anonymizationSupported": False},
    {"maxRetentionDays": 1, "autoDeleteOnTermination": False},
    {"maxRetentionDays": 1, "autoDeleteOnTermination": False, "anonymizationSupported": False,
     "extra": 1},
    {},
    "forever",
)
BAD_ACCESS = (
    {"readScope": "EVERYONE", "writeScope": "SAME_DOMAIN", "sharePolicy": "PRIVATE"},
    {"readScope": "SAME_DOMAIN", "writeScope": "same_domain", "sharePolicy": "PRIVATE"},
    {"readScope": "SAME_DOMAIN", "writeScope": "SAME_DOMAIN", "sharePolicy": "PUBLIC"},
)
BAD_FILTERS = (
    {"limit": 0}, {"limit": 1001}, {"limit": 1.5}, {"limit": -1}, {"limit": "5"},
    {"keyprefix": "a"}, {"key": "a"}, {"category": "cache"}, {"category": "NOPE"},
    {"since": "yesterday"}, {"until": "2026-03-01"}, {"keyPrefix": 5},
)

#: The audit fields the spec pins for each action; the rest are not compared.
PINNED = ("agent", "action", "key", "category", "actor", "bytes")


def entry_json(e: MemoryEntry) -> dict[str, Any]:
    """A store entry in the model's plain form, read attribute by attribute (not via
    ``to_json``, so a wrong ``to_json`` cannot hide a wrong attribute)."""
    assert isinstance(e, MemoryEntry)
    assert isinstance(e.value, bytes)
    assert isinstance(e.category, Category)
    rp = e.retention_policy
    assert rp is None or isinstance(rp, RetentionPolicy)
    got = {
        "entryId": e.entry_id,
        "category": e.category.value,
        "key": e.key,
        "value": base64.b64encode(e.value).decode(),
        "createdBy": e.created_by,
        "lastAccessedBy": e.last_accessed_by,
        "createdAt": e.created_at,
        "updatedAt": e.updated_at,
        "accessPolicy": {"readScope": e.access_policy.read_scope.value,
                         "writeScope": e.access_policy.write_scope.value,
                         "sharePolicy": e.access_policy.share_policy.value},
        "retentionPolicy": None if rp is None else {
            "maxRetentionDays": rp.max_retention_days,
            "autoDeleteOnTermination": rp.auto_delete_on_termination,
            "anonymizationSupported": rp.anonymization_supported,
        },
    }
    assert e.to_json() == got, "to_json() disagrees with the entry's attributes"
    return got


def as_access_arg(policy: Any, typed: bool) -> Any:
    if policy is None or not typed:
        return policy
    return AccessPolicy(Scope(policy["readScope"]), Scope(policy["writeScope"]),
                        SharePolicy(policy["sharePolicy"]))


def as_retention_arg(policy: Any, typed: bool) -> Any:
    if policy is UNSET_:
        return UNSET
    if policy is None or not typed:
        return policy
    return RetentionPolicy(policy["maxRetentionDays"], policy["autoDeleteOnTermination"],
                           policy["anonymizationSupported"])


class MemoryMachine(RuleBasedStateMachine):
    """The store and the model, driven by the same random steps."""

    #: How many store objects to open on the one database (see TwinStoreMachine).
    STORES = 1
    #: Where the schemas come from when the machine runs on PostgreSQL; ``None``
    #: runs it on a SQLite file.  Set by ``test_stateful_on_postgres``.
    pg_schemas: ClassVar[SchemaMaker | None] = None

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="rotifer-stateful-"))
        self.dot = self.tmp / ".rotifer"
        self.clock = ManualClock(START)
        self.pg_schema: str | None = None
        if self.pg_schemas is None:
            url = f"sqlite:{self.dot / 'playground.db'}"
        else:  # a new, empty schema for every example
            self.pg_schema, url = self.pg_schemas.new()
        self.stores = [MemoryStore.open(self.dot, url=url, clock=self.clock)
                       for _ in range(self.STORES)]
        assert {s.backend.name for s in self.stores} == {
            "sqlite" if self.pg_schemas is None else "postgresql"}
        self.model = Model(parse_rfc3339(START))
        self.audit_offset = 0
        self.model_offset = 0
        self.rnd = random.Random(0)

    def teardown(self) -> None:
        for store in self.stores:
            store.close()
        if self.pg_schemas is not None and self.pg_schema is not None:
            self.pg_schemas.drop(self.pg_schema)
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- plumbing ---------------------------------------------------------------

    def store(self) -> MemoryStore:
        return self.stores[self.rnd.randrange(len(self.stores))]

    def both(self, actual: Callable[[], Any], expected: Callable[[], Any],
             convert: Callable[[Any], Any] = lambda r: r) -> Any:
        """Run the store call and the model call; same result or same error code,
        then the same new audit lines."""
        try:
            want: Any = ("ok", expected())
        except ModelError as err:
            want = ("error", err.code)
        try:
            got: Any = ("ok", convert(actual()))
        except AgentMemoryError as err:
            got = ("error", str(err.code))
            assert str(err).startswith(f"{err.code}: ")
        assert got == want
        event(f"outcome: {want[1] if want[0] == 'error' else 'ok'}")
        for line in self.model.audit[self.model_offset:]:
            event(f"audit: {line['action']}")
        self.check_audit()
        return got

    def new_store_lines(self) -> list[dict[str, Any]]:
        path = self.dot / "audit.jsonl"
        if not path.exists():
            return []
        with path.open("rb") as f:
            f.seek(self.audit_offset)
            data = f.read()
        assert data == b"" or data.endswith(b"\n"), "audit log ends in a partial line"
        self.audit_offset += len(data)
        return [json.loads(line) for line in data.splitlines()]

    def check_audit(self) -> None:
        got = self.new_store_lines()
        want = self.model.audit[self.model_offset:]
        self.model_offset = len(self.model.audit)
        for line in got:
            for name in ("ts", *PINNED):
                assert name in line, f"audit line without {name!r}: {line}"
        # Every line the model expects, with the fields the spec pins; order within a
        # call is compared only where the spec fixes it (evictions, oldest first).
        def pinned(line: dict[str, Any], model_line: dict[str, Any]) -> tuple[Any, ...]:
            return tuple(line[f] if model_line[f] is not ANY else "*" for f in PINNED)

        assert len(got) == len(want), (
            f"audit lines differ:\n store: {[(g['action'], g['key']) for g in got]}\n"
            f" model: {[(w['action'], w['key']) for w in want]}")
        want_keys = sorted(pinned(w, w) for w in want)
        # Pair each store line with a model line of the same action and key.
        got_keys = []
        pool = list(want)
        for line in got:
            match = next((w for w in pool if (w["action"], w["key"], w["agent"]) ==
                          (line["action"], line["key"], line["agent"])), None)
            assert match is not None, f"unexpected audit line {line}; model wants {want}"
            pool.remove(match)
            got_keys.append(pinned(line, match))
            assert parse_rfc3339(line["ts"]) == match["ts"], (line["ts"], fmt_time(match["ts"]))
        assert sorted(got_keys) == want_keys
        assert [g["key"] for g in got if g["action"] == "evict"] == \
            [w["key"] for w in want if w["action"] == "evict"], "eviction order"

    def gene_view(self, agent: str, gene: Gene) -> Any:
        return self.store().for_gene(agent, gene.gene_id, gene.domain)

    # -- setup --------------------------------------------------------------------

    @initialize(quota_a=st.sampled_from((200, 256, 400)), quota_b=st.sampled_from((200, 300)),
                policy_a=st.sampled_from(DATA_POLICIES), policy_b=st.sampled_from(DATA_POLICIES),
                seed=st.integers(0, 2**32 - 1))
    def setup(self, quota_a: int, quota_b: int, policy_a: dict[str, Any] | None,
              policy_b: dict[str, Any] | None, seed: int) -> None:
        self.rnd = random.Random(seed)
        for agent, quota, policy in (("agent-a", quota_a, policy_a),
                                     ("agent-b", quota_b, policy_b)):
            dp = DataPolicy() if policy is None else DataPolicy.from_json(policy)
            self.store().create_agent(agent, quota, dp)
            self.model.create_agent(agent, quota, *(
                (None, False) if policy is None
                else (policy["maxRetentionDays"], policy["anonymizationSupported"])))
            assert self.store().has_agent(agent)
        self.check_audit()

    # -- gene calls ---------------------------------------------------------------

    def pick_key(self, agent: str, key: str, existing: int) -> str:
        """``key`` from the pool, or (most of the time when ``existing`` is odd) a key
        the model holds right now, so reads, rewrites and deletes hit live entries."""
        live = sorted(self.model.agents[agent].entries)
        if existing % 2 and live:
            return live[existing % len(live)]
        return key

    @rule(agent=AGENT_PICK, g=GENE_PICK, key=st.sampled_from(KEYS), existing=EXISTING,
          value=VALUE, category=st.sampled_from(CATEGORIES), access=ACCESS,
          retention=RETENTION, typed=st.booleans())
    def write(self, agent: str, g: int, key: str, existing: int, value: bytes, category: str,
              access: dict[str, str] | None, retention: Any, typed: bool) -> None:
        gene = GENES[g]
        key = self.pick_key(agent, key, existing)
        cat: Any = Category(category) if typed else category
        self.both(
            lambda: self.gene_view(agent, gene).write_memory(
                key, value, cat, as_access_arg(access, typed), as_retention_arg(retention, typed)),
            lambda: self.model.write(agent, gene, key, value, category, access, retention),
            entry_json)

    @rule(agent=AGENT_PICK, g=st.sampled_from((0, 1, 2, 3)), key=st.sampled_from(KEYS),
          value=FILL_VALUE, category=st.sampled_from(("CACHE", "CACHE", "PATTERN", "CONTEXT")))
    def fill(self, agent: str, g: int, key: str, value: bytes, category: str) -> None:
        """Plain writes of evictable entries, so cleanup has several to choose from
        (and its order shows)."""
        gene = GENES[g]
        self.both(lambda: self.gene_view(agent, gene).write_memory(key, value, category),
                  lambda: self.model.write(agent, gene, key, value, category), entry_json)

    @rule(agent=AGENT_PICK, g=GENE_PICK, key=st.sampled_from(KEYS), existing=EXISTING,
          value=VALUE, category=st.sampled_from(CATEGORIES), same=st.booleans())
    def rewrite(self, agent: str, g: int, key: str, existing: int, value: bytes, category: str,
                same: bool) -> None:
        """A rewrite that leaves the policies out, or passes the stored ones again
        (both allowed to any gene with write scope)."""
        gene = GENES[g]
        key = self.pick_key(agent, key, existing)
        old = self.model.agents[agent].entries.get(key)
        if same and old is not None:
            acc: Any = dict(old.access)
            ret: Any = None if old.retention is None else dict(old.retention)
        else:
            acc, ret = None, UNSET_
        self.both(lambda: self.gene_view(agent, gene).write_memory(
                      key, value, category, acc, UNSET if ret is UNSET_ else ret),
                  lambda: self.model.write(agent, gene, key, value, category, acc, ret),
                  entry_json)

    @rule(agent=AGENT_PICK, g=GENE_PICK, key=st.sampled_from(KEYS), existing=EXISTING,
          category=st.sampled_from((None, None, *CATEGORIES)))
    def read(self, agent: str, g: int, key: str, existing: int, category: str | None) -> None:
        gene = GENES[g]
        key = self.pick_key(agent, key, existing)
        self.both(lambda: self.gene_view(agent, gene).read_memory(key, category),
                  lambda: self.model.read(agent, gene, key, category),
                  lambda e: None if e is None else entry_json(e))

    @rule(agent=AGENT_PICK, g=GENE_PICK,
          category=st.sampled_from((None,) * 10 + CATEGORIES),
          prefix=st.sampled_from((None,) * 10 + PREFIXES),
          since=BOUND, until=BOUND, pick=st.integers(0, 15),
          limit=st.sampled_from((None, 1, 2, 3, 1000)), form=st.integers(0, 3))
    def query(self, agent: str, g: int, category: str | None, prefix: str | None,
              since: str, until: str, pick: int, limit: int | None, form: int) -> None:
        gene = GENES[g]
        times = sorted({e.updated_us for e in self.model.agents[agent].entries.values()})

        def stamp(bound: str) -> str | None:
            """``entry``: exactly some live entry's updatedAt (since is inclusive,
            until exclusive); else an offset in hours from now."""
            if bound == "none":
                return None
            if bound == "entry" and times:
                us = times[pick % len(times)]
            else:
                us = self.model.now + (0 if bound == "entry" else int(bound) * HOUR_US)
            if form == 1:  # the same instant, written with a +02:00 offset
                text = fmt_time(us + 2 * HOUR_US)
                return text[:-1] + "+02:00"
            return fmt_time(us)

        flt: dict[str, Any] = {}
        for name, val in (("category", category), ("keyPrefix", prefix),
                          ("since", stamp(since)), ("until", stamp(until)), ("limit", limit)):
            if val is not None:
                flt[name] = val
        arg: Any = flt
        if form == 2:
            arg = MemoryFilter(category=None if category is None else Category(category),
                               key_prefix=prefix, since=flt.get("since"),
                               until=flt.get("until"), limit=100 if limit is None else limit)
        elif form == 3 and not flt:
            arg = None
        self.both(lambda: self.gene_view(agent, gene).query_memory(arg),
                  lambda: self.model.query(agent, gene, flt),
                  lambda es: [entry_json(e) for e in es])

    @rule(agent=AGENT_PICK, g=GENE_PICK, key=st.sampled_from(KEYS), existing=EXISTING)
    def delete(self, agent: str, g: int, key: str, existing: int) -> None:
        gene = GENES[g]
        key = self.pick_key(agent, key, existing)
        self.both(lambda: self.gene_view(agent, gene).delete_memory(key),
                  lambda: self.model.delete(agent, gene, key))

    # -- invalid input (and a key too big for any quota here) ----------------------

    @rule(agent=AGENT_PICK, g=GENE_PICK, which=st.integers(0, 10),
          key=st.sampled_from(BAD_KEYS), category=st.sampled_from(BAD_CATEGORIES),
          retention=st.sampled_from(BAD_RETENTION), access=st.sampled_from(BAD_ACCESS),
          flt=st.sampled_from(BAD_FILTERS), good_key=st.sampled_from(KEYS),
          good_category=st.sampled_from(CATEGORIES))
    def invalid(self, agent: str, g: int, which: int, key: Any, category: str,
                retention: Any, access: Any, flt: dict[str, Any], good_key: str,
                good_category: str) -> None:
        gene = GENES[g]
        view = lambda: self.gene_view(agent, gene)  # noqa: E731
        m = self.model
        if which <= 4:
            args: list[Any] = [good_key, b"v", good_category, None, UNSET_]
            if which == 0:
                args[0] = key
            elif which == 1:
                args[2] = category
            elif which == 2:
                args[4] = retention
            elif which == 3:
                args[3] = access
            else:
                args[1] = "not bytes" if self.rnd.random() < 0.5 else b"x" * (1024 * 1024 + 1)
            k, v, c, a, r = args
            self.both(lambda: view().write_memory(k, v, c, a, UNSET if r is UNSET_ else r),
                      lambda: m.write(agent, gene, k, v, c, a, r), entry_json)
        elif which == 5:
            self.both(lambda: view().read_memory(key), lambda: m.read(agent, gene, key))
        elif which == 6:
            self.both(lambda: view().read_memory(good_key, category),
                      lambda: m.read(agent, gene, good_key, category))
        elif which == 7:
            self.both(lambda: view().delete_memory(key), lambda: m.delete(agent, gene, key))
        elif which == 8:
            self.both(lambda: view().query_memory(dict(flt)),
                      lambda: m.query(agent, gene, dict(flt)))
        else:
            # A valid key larger than any quota here: MEMORY_QUOTA_EXCEEDED, nothing
            # evicted.  "é" * 512 is 1024 UTF-8 bytes: valid, though 512 characters.
            big = "é" * 512 if which == 9 else "q" * 700
            self.both(lambda: view().write_memory(big, b"", good_category),
                      lambda: m.write(agent, gene, big, b"", good_category), entry_json)

    # -- the deployer ---------------------------------------------------------------

    @rule(agent=AGENT_PICK, category=st.sampled_from((None, None, *CATEGORIES, "cache")))
    def deployer_list(self, agent: str, category: str | None) -> None:
        self.both(lambda: self.store().deployer(agent).list(category),
                  lambda: self.model.deployer_list(agent, category),
                  lambda es: [entry_json(e) for e in es])

    @rule(agent=AGENT_PICK, by_key=st.booleans(), key=st.sampled_from((*KEYS, "", "nope")),
          existing=EXISTING, category=st.sampled_from((*CATEGORIES, "Cache")))
    def deployer_delete(self, agent: str, by_key: bool, key: str, existing: int,
                        category: str) -> None:
        dep = lambda: self.store().deployer(agent)  # noqa: E731
        if by_key:
            key = self.pick_key(agent, key, existing)
            self.both(lambda: dep().delete_key(key),
                      lambda: self.model.deployer_delete_key(agent, key))
        else:
            self.both(lambda: dep().delete_category(category),
                      lambda: self.model.deployer_delete_category(agent, category))

    # -- time -------------------------------------------------------------------------

    @rule(us=st.sampled_from(ADVANCES))
    def advance(self, us: int) -> None:
        self.clock.advance(micros=us)
        self.model.advance(us)
        assert self.clock.now_us() == self.model.now
        self.check_audit()  # moving the clock writes nothing

    # -- invariants ------------------------------------------------------------------

    @precondition(lambda self: bool(self.model.agents))
    @invariant()
    def usage_matches(self) -> None:
        """Used bytes = UTF-8 key + value bytes of the live entries; never over quota.
        Checked only when nothing has expired unseen: usage() may purge (like
        ``agent memory list``), which would hide whether the calls purge."""
        for agent in AGENTS:
            if self.model.pending_expired(agent):
                continue
            used, quota = self.store().usage(agent)
            a = self.model.agents[agent]
            assert (used, quota) == (a.used(), a.quota)
            assert used <= quota
        self.check_audit()


def _settings(examples: int, steps: int) -> settings:
    return settings(max_examples=examples, stateful_step_count=steps, deadline=None,
                    derandomize=bool(os.environ.get("CI")),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
                    print_blob=True)


MemoryMachine.TestCase.settings = _settings(
    int(os.environ.get("ROTIFER_STATEFUL_EXAMPLES", "100")), 50)
TestMemoryStateful = MemoryMachine.TestCase


class TwinStoreMachine(MemoryMachine):
    """Two store objects on one database and audit log, as two processes would
    have; every call goes to one of them at random."""

    STORES = 2


TwinStoreMachine.TestCase.settings = _settings(
    int(os.environ.get("ROTIFER_STATEFUL_TWIN_EXAMPLES", "30")), 30)
TestTwinStores = TwinStoreMachine.TestCase


class PostgresMemoryMachine(MemoryMachine):
    """MemoryMachine on the real PostgreSQL server (a fresh schema per example)."""


class PostgresTwinStoreMachine(TwinStoreMachine):
    """TwinStoreMachine on PostgreSQL: two backends, each with its own connections."""


@pytest.mark.postgres
@pytest.mark.parametrize("machine, examples, steps", [
    pytest.param(PostgresMemoryMachine,
                 int(os.environ.get("ROTIFER_STATEFUL_PG_EXAMPLES", "50")), 50, id="single"),
    pytest.param(PostgresTwinStoreMachine,
                 int(os.environ.get("ROTIFER_STATEFUL_PG_TWIN_EXAMPLES", "20")), 30, id="twin"),
    pytest.param(PostgresTwinStoreMachine,
                 int(os.environ.get("ROTIFER_STATEFUL_PGB_EXAMPLES", "15")), 30,
                 id="twin-pgbouncer"),
])
def test_stateful_on_postgres(request: pytest.FixtureRequest, machine: type[MemoryMachine],
                              examples: int, steps: int) -> None:
    pooled = request.node.callspec.id.endswith("pgbouncer")
    pg_schemas: SchemaMaker = request.getfixturevalue("pgb_schemas" if pooled else "pg_schemas")
    machine.pg_schemas = pg_schemas
    try:
        run_state_machine_as_test(machine, settings=_settings(examples, steps))
    finally:
        machine.pg_schemas = None
