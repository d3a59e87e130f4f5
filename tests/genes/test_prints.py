"""A Python gene's prints go to its log; stdout comes back whatever interrupts.

Real file descriptors: fd 1 is pointed at a pipe for each test, so what lands
on "stdout" is read back byte for byte.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

import pytest

from rotifer.genes.prints import LineWriter, _Redirect, prints_to_log


@contextlib.contextmanager
def stdout_pipe() -> Iterator[int]:
    """fd 1 is the write end of a pipe in the block; yields the read end.  (Not
    a fixture: pytest points fd 1 at its own capture file again after fixtures.)"""
    read, write = os.pipe()
    saved = os.dup(1)
    os.dup2(write, 1)
    os.close(write)
    try:
        yield read
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(read)


def stdout_now(read: int) -> bytes:
    os.write(1, b"|")
    return os.read(read, 65536)


def test_prints_go_to_the_sink_and_stdout_comes_back() -> None:
    lines: list[tuple[str, str]] = []
    before = sys.stdout
    with stdout_pipe() as pipe:
        with prints_to_log("g", lambda name, line: lines.append((name, line))):
            print("hello")
            sys.stdout.write("no newline")
        assert stdout_now(pipe) == b"|"
    assert lines == [("g", "hello"), ("g", "no newline")]
    assert sys.stdout is before


def test_an_interrupt_in_the_sink_still_gives_stdout_back() -> None:
    def sink(name: str, line: str) -> None:
        raise KeyboardInterrupt  # as a Ctrl-C landing while the last line is logged

    before = sys.stdout
    with stdout_pipe() as pipe:
        with pytest.raises(KeyboardInterrupt), prints_to_log("g", sink):
            sys.stdout.write("unfinished")
        assert stdout_now(pipe) == b"|"
    assert sys.stdout is before


def test_a_redirect_an_interrupt_left_in_place_is_undone_by_the_next() -> None:
    before = sys.stdout
    with stdout_pipe() as pipe:
        left = _Redirect(LineWriter("g", lambda name, line: None))
        left.do()  # as if an interrupt had kept its undo from running
        assert sys.stdout is not before
        with prints_to_log("h", lambda name, line: None):
            pass
        assert stdout_now(pipe) == b"|"
    assert sys.stdout is before
