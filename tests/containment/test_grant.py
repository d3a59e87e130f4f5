"""Grant (rotifer.genes.contain.sandbox) is a plain class for start-up speed
(issue 33); it keeps what the frozen dataclass it was promised: defaults,
keywords, comparison and hashing by its fields, no assignment."""

from __future__ import annotations

import pytest

from rotifer.genes.contain.sandbox import (
    CONTAINED,
    DEFAULT_MEMORY_MIB,
    DEFAULT_TASKS,
    DEFAULT_TEMP_MIB,
    Grant,
)


def test_a_grant_keeps_the_dataclass_s_promises() -> None:
    assert (CONTAINED.trusted, CONTAINED.tcp_ports, CONTAINED.memory_mib, CONTAINED.tasks,
            CONTAINED.temp_mib) == (False, (), DEFAULT_MEMORY_MIB, DEFAULT_TASKS,
                                    DEFAULT_TEMP_MIB)
    assert Grant() == CONTAINED and hash(Grant()) == hash(CONTAINED)
    granted = Grant(trusted=True, tcp_ports=(443,), memory_mib=64, tasks=8, temp_mib=16)
    assert granted == Grant(True, (443,), 64, 8, 16)
    assert granted != CONTAINED and granted != (True, (443,), 64, 8, 16)
    assert len({granted, Grant(True, (443,), 64, 8, 16), CONTAINED}) == 2
    assert repr(granted) == ("Grant(trusted=True, tcp_ports=(443,), memory_mib=64, tasks=8, "
                             "temp_mib=16)")
    with pytest.raises(AttributeError):
        granted.trusted = False
    with pytest.raises(AttributeError):
        del granted.tasks
    with pytest.raises(AttributeError):
        granted.other = 1
    assert granted.trusted is True
