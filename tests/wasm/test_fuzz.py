"""Hammer the four memory host functions (and log) with random pointers,
lengths and bytes.  Whatever comes in, a call returns one of the ABI's
results, writes only inside ``[out_ptr, out_ptr + out_cap)``, writes there
only a response or an error body, and leaves the store usable."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import wasmtime
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rotifer.memory import MemoryStore

from .conftest import AGENT, SENTINEL, Harness, gene_id, open_harness

RESULTS = {-1, -2, -4, -8, -10, -12, -13}
CODES = {"MEMORY_ACCESS_DENIED", "MEMORY_QUOTA_EXCEEDED", "MEMORY_INVALID_INPUT",
         "MEMORY_NOT_FOUND", "MEMORY_STORAGE_ERROR"}
OPS = ("read", "write", "query", "delete")

i32 = st.integers(-(2**31), 2**31 - 1)
edges = st.sampled_from([0, 1, -1, -(2**31), 2**31 - 1, 0xFFFF, 0x10000])

keys = st.one_of(st.sampled_from(["fuzz/a", "fuzz/b", "", "\x00", "k" * 1025]),
                 st.text(max_size=20))
categories = st.one_of(st.sampled_from(["PREFERENCE", "PATTERN", "CONTEXT", "CACHE"]),
                       st.text(max_size=10), st.none(), st.integers())
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=8)
values = st.one_of(st.binary(max_size=64).map(lambda b: base64.b64encode(b).decode()),
                   st.text(max_size=12), json_values)
scopes = st.sampled_from(["CREATOR_GENE_ONLY", "SAME_DOMAIN", "ALL_GENES", "DEPLOYER_CONFIGURED",
                          "same_domain"])
access = st.fixed_dictionaries({"readScope": scopes, "writeScope": scopes,
                                "sharePolicy": st.sampled_from(["PRIVATE", "KNOWLEDGE_GENE"])})
retention = st.one_of(st.none(), st.fixed_dictionaries({
    "maxRetentionDays": st.one_of(st.none(), st.integers(-2, 2**31)),
    "autoDeleteOnTermination": st.booleans(), "anonymizationSupported": st.booleans()}))
requests = st.one_of(
    st.fixed_dictionaries({"key": keys}, optional={
        "category": categories, "value": values, "accessPolicy": access | json_values,
        "retentionPolicy": retention, "limit": st.integers(-1, 2000)}),
    st.fixed_dictionaries({}, optional={"category": categories, "keyPrefix": keys,
                                        "since": st.text(max_size=30), "limit": i32}),
    json_values,
)
valid_categories = st.sampled_from(["PREFERENCE", "PATTERN", "CONTEXT", "CACHE"])
fuzz_keys = st.sampled_from(["fuzz/a", "fuzz/b", "fuzz/ü"]) | st.text(min_size=1, max_size=12)
b64_values = st.binary(max_size=300).map(lambda b: base64.b64encode(b).decode())
#: A well-formed request per call, so most examples get past the JSON checks.
well_formed = {
    "read": st.fixed_dictionaries({"key": fuzz_keys}, optional={"category": valid_categories}),
    "write": st.fixed_dictionaries(
        {"key": fuzz_keys, "category": valid_categories, "value": b64_values},
        optional={"accessPolicy": access, "retentionPolicy": retention}),
    "query": st.fixed_dictionaries({}, optional={
        "category": valid_categories, "keyPrefix": st.sampled_from(["", "fuzz/", "x"]),
        "limit": st.integers(1, 1000)}),
    "delete": st.fixed_dictionaries({"key": fuzz_keys}),
}
malformed = st.one_of(
    requests.map(lambda r: json.dumps(r).encode()),
    st.binary(max_size=200),
    st.text(max_size=100).map(lambda t: t.encode("utf-8", "surrogatepass")),
)


def check_out(h: Harness, result: int, out_ptr: int, out_cap: int, size: int) -> None:
    out_ok = out_ptr >= 0 and out_cap >= 0 and out_ptr + out_cap <= size
    if result >= 0:
        assert out_ok and result <= out_cap
        json.loads(h.guest.read(out_ptr, result))
        return
    if not out_ok or out_cap == 0:
        return
    written = h.guest.read(out_ptr, out_cap)
    if out_cap > 8192 or written == bytes([SENTINEL]) * out_cap:
        return  # nothing written (or a region too large to have been marked)
    assert result != -4
    body = json.loads(written[: written.index(b"\x00")])
    assert set(body) == {"__rotifer_error"}
    assert body["__rotifer_error"]["code"] in CODES


def test_fuzz_the_host_functions(harness_module: wasmtime.Module, tmp_path: Path) -> None:
    with MemoryStore.open(tmp_path / ".rotifer") as store:
        store.create_agent(AGENT)
        memory = store.for_gene(AGENT, gene_id("fuzz"), "fuzz")
        with open_harness(harness_module, memory) as inst:
            h = Harness(inst)
            size = h.guest.size()

            @settings(max_examples=300, deadline=None, database=None,
                      suppress_health_check=[HealthCheck.too_slow])
            @given(data=st.data(), op=st.sampled_from(OPS))
            def hammer(data: Any, op: str) -> None:
                if data.draw(st.integers(0, 2)):
                    raw = json.dumps(data.draw(well_formed[op])).encode()
                else:
                    raw = data.draw(malformed)
                half = size // 2  # requests below, sane out buffers above: no overlap
                place = data.draw(st.integers(0, half - len(raw)))
                h.guest.write(0, bytes(size))  # no state carried over from earlier examples
                h.guest.write(place, raw)
                # mostly sane pointers, so the requests themselves get exercised
                sane = data.draw(st.integers(0, 9)) < 7
                if sane:
                    req_ptr, req_len = place, len(raw)
                    out_cap = data.draw(st.integers(0, 4096))
                    out_ptr = data.draw(st.integers(half, size - out_cap))
                else:
                    req_ptr = data.draw(st.one_of(st.just(place), i32, edges,
                                                  st.integers(size - 64, size + 64)))
                    req_len = data.draw(st.one_of(st.just(len(raw)), i32, edges,
                                                  st.integers(0, 64)))
                    out_ptr = data.draw(st.one_of(st.integers(0, size), i32, edges,
                                                  st.integers(size - 64, size + 64)))
                    out_cap = data.draw(st.one_of(st.integers(0, 8192), i32, edges,
                                                  st.integers(size - 64, size + 64)))
                if out_ptr >= 0 and 0 <= out_cap <= 8192 and out_ptr + out_cap <= size:
                    h.guest.write(out_ptr, bytes([SENTINEL]) * out_cap)
                before = h.guest.read(0, size)
                result = h.raw(op, req_ptr, req_len, out_ptr, out_cap)
                assert result in RESULTS or result >= 0
                after = h.guest.read(0, size)
                lo = max(0, min(out_ptr, size)) if out_cap >= 0 else 0
                hi = max(lo, min(size, out_ptr + out_cap)) if out_ptr >= 0 else lo
                if not (out_ptr >= 0 and out_cap >= 0 and out_ptr + out_cap <= size):
                    assert after == before  # nowhere valid to write: nothing written
                else:
                    assert after[:lo] == before[:lo] and after[hi:] == before[hi:]
                check_out(h, result, out_ptr, out_cap, size)
                # log never fails and never writes
                inst.call("call_log", data.draw(i32), req_ptr, req_len)
                assert h.guest.read(0, size) == after

            hammer()
            # the store is still consistent and usable
            assert h.call("write", {"key": "fuzz/after", "value": "eA==", "category": "CACHE"}) > 0
            assert h.response(h.call("read", {"key": "fuzz/after"}))["key"] == "fuzz/after"
        entries = store.deployer(AGENT).list()
        used, _ = store.usage(AGENT)
        assert used == sum(e.size for e in entries)
