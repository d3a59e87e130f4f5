"""The memory host functions, called directly through harness.wat.

Each test states one rule of the ABI: what is written to out, which result
comes back, and that nothing outside the gene's memory or out is touched.
"""

from __future__ import annotations

import base64
import gc
import json
import logging
import weakref

import pytest
import wasmtime

from rotifer.genes.wasm import GeneInstance
from rotifer.memory import DeniedMemory, MemoryStore
from tests.audit_reading import audit_lines

from .conftest import (
    AGENT,
    OUT,
    REQ,
    ROOMY,
    SENTINEL,
    Harness,
    gene_id,
    open_harness,
)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def write_req(key: str, value: bytes = b"x", category: str = "CACHE", **extra: object) -> dict:
    return {"key": key, "value": b64(value), "category": category, **extra}


# -- the four calls ----------------------------------------------------------------


def test_write_returns_the_entry_json_and_read_returns_it_again(harness: Harness) -> None:
    r = harness.call("write", write_req("probe/a", b"hello", "PREFERENCE"))
    written = harness.response(r)
    assert written["key"] == "probe/a"
    assert written["category"] == "PREFERENCE"
    assert base64.b64decode(written["value"]) == b"hello"
    assert written["createdBy"] == gene_id("harness")
    assert written["accessPolicy"] == {"readScope": "SAME_DOMAIN", "writeScope": "SAME_DOMAIN",
                                       "sharePolicy": "PRIVATE"}
    assert written["retentionPolicy"] is None
    r = harness.call("read", {"key": "probe/a", "category": "PREFERENCE"})
    assert harness.response(r) == written | {"lastAccessedBy": gene_id("harness")}


def test_read_of_a_missing_key_is_json_null(harness: Harness) -> None:
    r = harness.call("read", {"key": "probe/missing"})
    assert r == 4
    assert harness.guest.read(OUT, 5) == b"null\x00"


def test_read_with_another_category_is_null(harness: Harness) -> None:
    harness.call("write", write_req("probe/c", category="CACHE"))
    assert harness.response(harness.call("read", {"key": "probe/c", "category": "PATTERN"})) is None


def test_read_category_null_means_any_category(harness: Harness) -> None:
    harness.call("write", write_req("probe/c", category="CONTEXT"))
    entry = harness.response(harness.call("read", {"key": "probe/c", "category": None}))
    assert entry["category"] == "CONTEXT"


def test_query_takes_the_filter_itself_and_returns_an_array(harness: Harness) -> None:
    for key in ("fmt/a", "fmt/b", "other/c"):
        harness.call("write", write_req(key))
    everything = harness.response(harness.call("query", {}))
    assert sorted(e["key"] for e in everything) == ["fmt/a", "fmt/b", "other/c"]
    some = harness.response(harness.call("query", {"keyPrefix": "fmt/", "limit": 1}))
    assert [e["key"] for e in some] == ["fmt/b"]  # most recently updated first
    assert harness.response(harness.call("query", b"null")) == everything


def test_query_with_an_unknown_filter_field_is_invalid(harness: Harness) -> None:
    assert harness.call("query", {"prefix": "x"}) == -10
    assert harness.body()["__rotifer_error"]["code"] == "MEMORY_INVALID_INPUT"


@pytest.mark.parametrize("request_", [b"[]", b'"x"', b"3"])
def test_query_request_must_be_an_object(harness: Harness, request_: bytes) -> None:
    assert harness.call("query", request_) == -10


def test_delete_returns_an_empty_object(harness: Harness) -> None:
    harness.call("write", write_req("probe/d"))
    r = harness.call("delete", {"key": "probe/d"})
    assert harness.response(r) == {}
    assert harness.call("delete", {"key": "probe/d"}) == -12
    assert harness.body() == {"__rotifer_error": {
        "code": "MEMORY_NOT_FOUND", "message": "no memory entry 'probe/d'"}}


def test_retention_policy_absent_null_and_given(harness: Harness) -> None:
    policy = {"maxRetentionDays": 3, "autoDeleteOnTermination": False,
              "anonymizationSupported": False}
    e = harness.response(harness.call("write", write_req("probe/r", retentionPolicy=policy)))
    assert e["retentionPolicy"] == policy
    # absent: the stored policy stays
    e = harness.response(harness.call("write", write_req("probe/r")))
    assert e["retentionPolicy"] == policy
    # an explicit null resets it to follow the agent's data policy
    e = harness.response(harness.call("write", write_req("probe/r", retentionPolicy=None)))
    assert e["retentionPolicy"] is None


def test_access_policy_is_passed_through(harness: Harness) -> None:
    policy = {"readScope": "ALL_GENES", "writeScope": "CREATOR_GENE_ONLY",
              "sharePolicy": "PRIVATE"}
    e = harness.response(harness.call("write", write_req("probe/p", accessPolicy=policy)))
    assert e["accessPolicy"] == policy


def test_values_are_bytes_not_text(harness: Harness) -> None:
    value = bytes(range(256))
    harness.call("write", write_req("probe/bin", value))
    entry = harness.response(harness.call("read", {"key": "probe/bin"}))
    assert base64.b64decode(entry["value"]) == value


def test_response_is_followed_by_a_nul_only_when_there_is_room(harness: Harness) -> None:
    r = harness.call("read", {"key": "probe/none"}, cap=4)
    assert r == 4
    assert harness.guest.read(OUT, 5) == b"null" + bytes([SENTINEL])
    r = harness.call("read", {"key": "probe/none"}, cap=5)
    assert harness.guest.read(OUT, 6) == b"null\x00" + bytes([SENTINEL])


def test_unicode_keys_round_trip(harness: Harness) -> None:
    r = harness.call("write", write_req("probe/ünï/😀"))
    assert harness.response(r)["key"] == "probe/ünï/😀"
    assert harness.response(harness.call("read", {"key": "probe/ünï/😀"}))["key"] == "probe/ünï/😀"


# -- -1: out too small -------------------------------------------------------------


def test_out_too_small_with_room_for_the_body(harness: Harness) -> None:
    harness.call("write", write_req("probe/big", b"v" * 300))
    needed = harness.call("read", {"key": "probe/big"})
    r = harness.call("read", {"key": "probe/big"}, cap=200)
    assert r == -1
    assert harness.body() == {"__rotifer_error": {
        "code": "MEMORY_INVALID_INPUT",
        "message": f"out is too small for the response: it needs {needed} bytes, out_cap is 200"}}
    assert harness.guest.read(OUT + 200, 16) == bytes([SENTINEL]) * 16


def test_out_too_small_for_the_body_writes_nothing(harness: Harness) -> None:
    r = harness.call("read", {"key": "probe/none"}, cap=3)
    assert r == -1
    assert harness.untouched(3)


def test_body_without_its_message_when_only_that_fits(harness: Harness) -> None:
    short = json.dumps({"__rotifer_error": {"code": "MEMORY_INVALID_INPUT", "message": ""}},
                       separators=(",", ":"))
    r = harness.call("read", b"{", cap=len(short) + 1)
    assert r == -10
    assert harness.body() == json.loads(short)


def test_write_that_gets_minus_one_was_carried_out(harness: Harness) -> None:
    r = harness.call("write", write_req("probe/w"), cap=250)
    assert r == -1
    message = harness.body()["__rotifer_error"]["message"]
    assert "the call was carried out" in message
    assert harness.response(harness.call("read", {"key": "probe/w"}))["key"] == "probe/w"


def test_delete_with_no_room_for_the_response(harness: Harness) -> None:
    harness.call("write", write_req("probe/del"))
    assert harness.call("delete", {"key": "probe/del"}, cap=1) == -1
    assert harness.untouched(1)
    assert harness.call("delete", {"key": "probe/del"}) == -12


# -- -10: malformed requests ---------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "request_", "fragment"),
    [
        ("read", b"", "not JSON"),
        ("read", b"{", "not JSON"),
        ("read", b"\xff\xfe", "not UTF-8"),
        ("read", b'{"key": NaN}', "NaN"),
        ("read", b'{"key": "a", "key": "b"}', "twice"),
        ("read", b'{"key": "\\ud800"}', "surrogate"),
        ("read", b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        ("read", b"[]", "JSON object"),
        ("read", b'{"category": "CACHE"}', "missing key"),
        ("read", b'{"key": 5}', "key must be a string"),
        ("read", b'{"key": "a", "limit": 1}', "unknown field"),
        ("read", b'{"key": ""}', "empty"),
        ("read", b'{"key": "a", "category": "cache"}', "category"),
        ("write", b'{"key": "a", "category": "CACHE"}', "missing value"),
        ("write", b'{"key": "a", "value": "!!", "category": "CACHE"}', "base64"),
        ("write", b'{"key": "a", "value": "eA", "category": "CACHE"}', "base64"),
        ("write", b'{"key": "a", "value": 5, "category": "CACHE"}', "base64"),
        ("write", b'{"key": "a", "value": "eA==", "category": "CACHE", "ttl": 1}', "unknown"),
        ("write", b'{"key": "a", "value": "eA==", "category": "OTHER"}', "category"),
        ("write", b'{"key": "a", "value": "eA==", "category": "CACHE", '
                  b'"retentionPolicy": {"maxRetentionDays": 0, "autoDeleteOnTermination": false, '
                  b'"anonymizationSupported": false}}', "maxRetentionDays"),
        ("write", b'{"key": "a", "value": "eA==", "category": "CACHE", '
                  b'"accessPolicy": {"readScope": "SAME_DOMAIN"}}', "accessPolicy"),
        ("delete", b'{"key": "a", "category": "CACHE"}', "unknown"),
        ("delete", b"{}", "missing key"),
        ("query", b'{"limit": 0}', "limit"),
    ],
)
def test_malformed_requests_get_minus_ten_and_a_body(
    harness: Harness, op: str, request_: bytes, fragment: str
) -> None:
    assert harness.call(op, request_) == -10
    body = harness.body()["__rotifer_error"]
    assert body["code"] == "MEMORY_INVALID_INPUT"
    assert fragment.lower() in body["message"].lower()


def test_value_over_one_mebibyte_is_invalid(harness: Harness) -> None:
    harness.instance.call("grow", 49)
    request = write_req("probe/huge", b"x" * (1024 * 1024 + 1))
    assert harness.call("write", request, req=0x100000, out=0x280000) == -10
    assert "1 MiB" in harness.body(out=0x280000)["__rotifer_error"]["message"]


def test_a_value_of_exactly_one_mebibyte_fits(harness: Harness) -> None:
    harness.instance.call("grow", 49)  # 65 pages: room for a 1.4 MB request and its response
    request = write_req("probe/mib", b"x" * (1024 * 1024))
    r = harness.call("write", request, cap=0x180000, req=0x100000, out=0x280000)
    assert r > 1024 * 1024
    entry = harness.response(r, out=0x280000)
    assert len(base64.b64decode(entry["value"])) == 1024 * 1024


# -- pointers and lengths -------------------------------------------------------------


def test_request_outside_memory_is_invalid_with_a_body(harness: Harness) -> None:
    size = harness.guest.size()
    assert harness.raw("read", size - 2, 10, OUT, 4096) == -10
    assert "outside the gene's memory" in harness.body()["__rotifer_error"]["message"]


@pytest.mark.parametrize("req_ptr", [-1, -4096, 0x7FFF_FFFF])
def test_request_pointers_past_memory(harness: Harness, req_ptr: int) -> None:
    assert harness.raw("read", req_ptr, 4, OUT, 4096) == -10


@pytest.mark.parametrize("req_len", [-1, 0x7FFF_FFFF, 8 * 1024 * 1024 + 1])
def test_huge_request_lengths(harness: Harness, req_len: int) -> None:
    assert harness.raw("read", REQ, req_len, OUT, 4096) == -10
    assert "at most 8388608" in harness.body()["__rotifer_error"]["message"]


@pytest.mark.parametrize(("out_ptr", "out_cap"), [(-1, 16), (0, -1), (0x7FFF_FFFF, 1),
                                                   (OUT, 0x7FFF_FFFF), (1 << 20, 1)])
def test_out_outside_memory_writes_nothing(harness: Harness, out_ptr: int, out_cap: int) -> None:
    before = harness.guest.read(0, harness.guest.size())
    raw = json.dumps({"key": "probe/x"}).encode()
    harness.guest.write(REQ, raw)
    before = harness.guest.read(0, harness.guest.size())
    assert harness.raw("read", REQ, len(raw), out_ptr, out_cap) == -10
    assert harness.guest.read(0, harness.guest.size()) == before


def test_out_ending_exactly_at_the_end_of_memory(harness: Harness) -> None:
    size = harness.guest.size()
    raw = b'{"key": "probe/x"}'
    harness.guest.write(REQ, raw)
    assert harness.raw("read", REQ, len(raw), size - 4, 4) == 4
    assert harness.guest.read(size - 4, 4) == b"null"


def test_pointers_into_grown_memory_are_valid(harness: Harness) -> None:
    size = harness.guest.size()
    assert harness.raw("read", size, 2, OUT, 4096) == -10
    harness.instance.call("grow", 1)
    raw = b'{"key": "probe/x"}'
    harness.guest.write(size, raw)
    assert harness.raw("read", size, len(raw), size + 1024, 64) == 4


def test_request_and_out_may_overlap(harness: Harness) -> None:
    harness.call("write", write_req("probe/o", b"abc"))
    raw = b'{"key": "probe/o"}'
    harness.guest.write(REQ, raw)
    r = harness.raw("read", REQ, len(raw), REQ, 4096)
    assert json.loads(harness.guest.read(REQ, r))["key"] == "probe/o"


# -- refusals and store failures --------------------------------------------------------


def test_access_denied_by_scope(harness_module: wasmtime.Module, store: MemoryStore,
                                rotifer_dir) -> None:
    private = {"readScope": "CREATOR_GENE_ONLY", "writeScope": "CREATOR_GENE_ONLY",
               "sharePolicy": "PRIVATE"}
    with open_harness(harness_module, store.for_gene(AGENT, gene_id("a"), "probe")) as inst:
        a = Harness(inst)
        assert a.call("write", write_req("probe/mine", accessPolicy=private)) > 0
    with open_harness(harness_module, store.for_gene(AGENT, gene_id("b"), "probe")) as inst:
        b = Harness(inst)
        assert b.call("read", {"key": "probe/mine"}) == -2
        assert b.body()["__rotifer_error"]["code"] == "MEMORY_ACCESS_DENIED"
        assert b.call("write", write_req("probe/mine")) == -2
        assert b.call("delete", {"key": "probe/mine"}) == -2
        assert b.response(b.call("query", {})) == []  # left out, not reported
    denied = [line for line in audit_lines(rotifer_dir) if line["action"] == "access_denied"]
    assert [line["operation"] for line in denied] == ["read", "write", "delete"]
    assert {line["actor"] for line in denied} == {gene_id("b")}


@pytest.mark.parametrize("memory_kind", ["no v2 id", "rotifer run"])
def test_a_gene_without_access_gets_minus_two_on_every_call(
    harness_module: wasmtime.Module, store: MemoryStore, memory_kind: str
) -> None:
    memory = (store.for_gene(AGENT, None, "probe") if memory_kind == "no v2 id"
              else DeniedMemory())
    with open_harness(harness_module, memory) as inst:
        h = Harness(inst)
        calls = [
            ("read", {"key": "probe/x"}), ("write", write_req("probe/x")), ("query", {}),
            ("delete", {"key": "probe/x"}),
            # even malformed ones: the gene hears -2, not -10
            ("read", b"{"), ("write", {"key": "probe/x"}), ("query", b"[]"),
            ("delete", b"\xff"), ("read", {"key": ""}),
        ]
        for op, request in calls:
            assert h.call(op, request) == -2, (op, request)
            assert h.body()["__rotifer_error"]["code"] == "MEMORY_ACCESS_DENIED"
        assert h.raw("read", -1, 5, OUT, 4096) == -2
        assert h.raw("read", REQ, 5, -1, 4096) == -2


def test_storage_error_when_the_store_is_closed(harness: Harness, store: MemoryStore) -> None:
    store.close()
    for op, request in [("read", {"key": "probe/x"}), ("write", write_req("probe/x")),
                        ("query", {}), ("delete", {"key": "probe/x"})]:
        assert harness.call(op, request) == -13
        assert harness.body()["__rotifer_error"]["code"] == "MEMORY_STORAGE_ERROR"


class Exploding:
    """A memory view whose every call raises something that is not a MemoryError."""

    def read_memory(self, *args: object) -> None:
        raise RuntimeError("boom")

    write_memory = query_memory = delete_memory = read_memory


def test_an_unexpected_exception_is_a_storage_error_not_a_crash(
    harness_module: wasmtime.Module, caplog: pytest.LogCaptureFixture
) -> None:
    with open_harness(harness_module, Exploding()) as inst:  # type: ignore[arg-type]
        h = Harness(inst)
        with caplog.at_level(logging.ERROR):
            assert h.call("read", {"key": "probe/x"}) == -13
        assert h.body() == {"__rotifer_error": {
            "code": "MEMORY_STORAGE_ERROR", "message": "the memory host failed: RuntimeError"}}
        assert "boom" in caplog.text
        assert h.call("read", b"{") == -10  # malformed: the probe's RuntimeError is ignored


class Interrupted:
    """A memory view whose every call is interrupted (as by ^C)."""

    def read_memory(self, *args: object) -> None:
        raise KeyboardInterrupt

    write_memory = query_memory = delete_memory = read_memory


def test_an_interrupt_in_a_memory_call_reaches_the_caller(
    harness_module: wasmtime.Module, host_path: str
) -> None:
    """A BaseException is no result code: it stops the guest and is raised
    again where Python called into it, on either way of defining the calls."""
    with open_harness(harness_module, Interrupted()) as inst:  # type: ignore[arg-type]
        h = Harness(inst)
        with pytest.raises(KeyboardInterrupt):
            h.call("read", {"key": "probe/x"})
        with pytest.raises(KeyboardInterrupt):
            h.call("write", write_req("probe/x"))


def test_results_and_pointers_cross_as_32_bit_values(harness: Harness) -> None:
    """Pointers and lengths arrive unsigned (a negative i32 is a huge u32);
    a negative result arrives as the gene's negative i32."""
    assert harness.raw("read", 0x7FFF_FFFF, 5, OUT, 4096) == -10
    assert harness.raw("read", -2, 1, OUT, 4096) == -10
    body = harness.body()["__rotifer_error"]
    assert body["message"].startswith("the request [4294967294, 4294967295) is outside")


def test_each_memory_call_charges_its_fuel_exactly(harness: Harness) -> None:
    """host_call_fuel plus one unit per request byte, taken from the store's fuel."""
    store = harness.instance.store

    def spent(request: bytes) -> int:
        harness.guest.write(REQ, request)
        before = store.get_fuel()
        harness.raw("read", REQ, len(request), OUT, 4096)
        return before - store.get_fuel()

    short = spent(b'{"key":"a"}')
    assert spent(b'{"key":"' + b"a" * 500 + b'"}') - short == 510 - 11
    assert short == spent(b'{"key":"b"}')
    assert ROOMY.host_call_fuel + 11 <= short < ROOMY.host_call_fuel + 11 + 100


def test_a_run_with_memory_calls_frees_its_store(harness_module: wasmtime.Module,
                                                store: MemoryStore, host_path: str) -> None:
    """wasmtime holds the host functions until the store goes; they must not
    keep the store alive (every run of a gene using memory would leak its memory)."""
    with open_harness(harness_module, store.for_gene(AGENT, gene_id("harness"), "probe")) as inst:
        h = Harness(inst)
        assert h.call("read", {"key": "probe/x"}) == 4
        h.instance.call("call_log", 1, REQ, 4)
        freed = weakref.ref(inst.store)
    assert h.call("read", {"key": "probe/x"}) == -4  # closed: the budget is spent
    del inst, h
    gc.collect()
    assert freed() is None


# -- log ----------------------------------------------------------------------------------


def _log_some(inst: GeneInstance) -> None:
    inst.call("grow", 3)
    inst.guest.write(REQ, "hello ✓".encode())
    inst.call("call_log", 2, REQ, len("hello ✓".encode()))
    inst.call("call_log", 0, REQ, 5)
    inst.call("call_log", 1, -1, 5)         # out of bounds: dropped
    inst.call("call_log", 1, REQ, -1)       # huge length: dropped
    inst.call("call_log", 3, REQ, 100_000)  # too long: cut to the message cap


def test_log_passes_messages_to_the_sink(harness_module: wasmtime.Module, store: MemoryStore,
                                         caplog: pytest.LogCaptureFixture) -> None:
    """With a sink (the CLI's), every line goes there -- and not also to the
    logger, where the CLI would print warnings a second time."""
    seen: list[tuple[int, str]] = []
    memory = store.for_gene(AGENT, gene_id("harness"), "probe")
    with GeneInstance(harness_module, memory, ROOMY, name="logger",
                      log_sink=lambda level, text: seen.append((level, text))) as inst, \
            caplog.at_level(logging.DEBUG, logger="rotifer.genes.wasm.gene"):
        _log_some(inst)
    assert seen[:2] == [(2, "hello ✓"), (0, "hello")]
    assert len(seen) == 3 and seen[2][1].endswith(" …")
    assert len(seen[2][1].removesuffix(" …").encode()) == 16 * 1024
    assert caplog.records == []


def test_log_without_a_sink_goes_to_the_logger(harness_module: wasmtime.Module,
                                               store: MemoryStore,
                                               caplog: pytest.LogCaptureFixture) -> None:
    memory = store.for_gene(AGENT, gene_id("harness"), "probe")
    with GeneInstance(harness_module, memory, ROOMY, name="logger") as inst, \
            caplog.at_level(logging.DEBUG, logger="rotifer.genes.wasm.gene"):
        _log_some(inst)
    assert [r.levelname for r in caplog.records] == ["WARNING", "DEBUG", "ERROR"]
    assert "[logger] hello ✓" in caplog.text


def test_the_c_callback_is_used_only_with_a_checked_wasmtime_py(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Hand-written C signatures against an untested library would corrupt
    memory rather than fail: any other major version takes define_func."""
    import importlib.metadata

    from rotifer.genes.wasm import rawcall

    real = importlib.metadata.version("wasmtime")
    untested = str(max(rawcall.TESTED_MAJORS) + 1) + ".0.0"
    monkeypatch.setattr(importlib.metadata, "version", lambda name: untested)
    rawcall._define_unchecked.cache_clear()  # it is looked up once per process
    try:
        with caplog.at_level(logging.WARNING, logger="rotifer.genes.wasm.rawcall"):
            assert not rawcall.available()
            assert not rawcall.available()  # said once: the answer is cached
        assert [r.getMessage().split(" is not")[0] for r in caplog.records] == [
            f"wasmtime-py {untested}"]
    finally:
        monkeypatch.setattr(importlib.metadata, "version", lambda name: real)
        rawcall._define_unchecked.cache_clear()
    # The installed version (constraints.txt pins one of TESTED_MAJORS) takes the fast path.
    assert rawcall.available() == (int(real.split(".")[0]) in rawcall.TESTED_MAJORS)
