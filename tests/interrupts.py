"""A signal landing at every point of a call: the helper the interrupt tests share.

CPython runs a pending signal's handler only at certain points of the bytecode
(a function's start, just after a call returns, a loop's jump back).  Instead
of sending real signals and hoping one lands in a narrow window, a trace
function calls the signal's current handler at the chosen point, as the
interpreter does when a real signal arrives, so code that swapped the handler
(``rotifer.memory.signals.signals_deferred``) takes it as it would a real one.
"""

from __future__ import annotations

import dis
import gc
import signal
import sys
import types
from collections.abc import Callable
from typing import Any


def interrupt_at(step: int, action: Callable[[], object], sig: int = signal.SIGINT,
                 landed: list[object] | None = None,
                 returned: list[object] | None = None) -> tuple[int, bool]:
    """Run ``action`` with ``sig``'s handler called at its ``step``-th point where
    CPython may run a signal's handler: a function's start, just after a call
    returns, a loop's jump back (where the interpreter checks for pending
    signals); returns (points seen, whether KeyboardInterrupt came out).
    ``landed`` receives the handler that ran there (a deferral's recorder, or
    the raising one); ``returned`` the action's result, stored by this
    untraced frame so that no point falls between the call and the keeping."""
    seen = 0
    last: dict[int, str] = {}  # the frame's instruction before this one

    def trace(frame: types.FrameType, event: str, arg: object) -> Any:
        nonlocal seen
        frame.f_trace_opcodes = True
        key = id(frame)
        if event == "call":
            last[key] = "RESUME"
        elif event == "opcode":
            before = last.get(key, "")
            last[key] = dis.opname[frame.f_code.co_code[frame.f_lasti]]
            if before in ("RESUME", "CALL", "JUMP_BACKWARD"):
                seen += 1
                if seen == step:
                    handler = signal.getsignal(sig)
                    assert callable(handler)
                    if landed is not None:
                        landed.append(handler)
                    handler(sig, frame)
        elif event == "return":
            last.pop(key, None)
        return trace

    gc.disable()  # a finalizer the collector runs meanwhile is not the code under test
    sys.settrace(trace)
    try:
        result = action()
        if returned is not None:
            returned.append(result)
    except KeyboardInterrupt:
        return seen, True
    finally:
        sys.settrace(None)
        gc.enable()
    return seen, False
