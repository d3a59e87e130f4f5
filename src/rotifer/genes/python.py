"""Running a Python gene: ``def express(input, ctx)`` in ``gene.py``.

Python genes are the contract's stand-in for the seed's "genes that run on
Node.js": they get the four memory calls as ``ctx.memory``.  A contained gene
(the default) runs here too, but in a confined process forked from the fork
server (:mod:`rotifer.genes.contain.python_host`); a trusted one runs in this
process.

Why the module is built from ``Gene.code`` and not imported from disk: the v2
id was computed from those bytes, and memory calls act under that id, so the
code that runs must be exactly the code that was checked -- a file edited
between loading and running must not act under the old id.  Each run gets a
fresh module object that is never put in ``sys.modules``, so runs do not
share module state (a gene keeps what it learns in memory, not in globals).

What a gene can do and what it becomes:

- return a JSON value            -> the output (round-tripped through JSON, so
                                    tuples become lists and a non-JSON value
                                    is a failure, as it would be for WASM)
- return a lone ``{"__rotifer_error": {"code", "message"}}`` or raise
  :class:`~rotifer.genes.errors.GeneRejected` -> ``GeneRejected``
- let a :class:`rotifer.memory.MemoryError` escape -> re-raised as is, so the
  CLI prints e.g. ``MEMORY_ACCESS_DENIED: ...``
- raise anything else (any ``BaseException``: ``sys.exit()``, a
  ``KeyboardInterrupt`` it raises itself, its own ``BaseException``
  subclass), or fail to load -> ``GeneFailed`` naming the gene and keeping
  the exception's type and message (no traceback: the user needs to know what
  broke, not where in the runtime).  A real Ctrl-C (SIGINT) while the gene
  runs is still the user's interruption: it propagates as
  ``KeyboardInterrupt`` (the CLI exits 130), even if the gene swallowed it.
  The two are told apart by a SIGINT handler installed while the gene runs
  in the main thread.
- define ``async def express`` (or return a coroutine) -> ``GeneFailed``:
  express must be synchronous; the coroutine is closed, never awaited, so no
  RuntimeWarning leaks.  ``rotifer wrap`` refuses ``async def express``
  statically (INVALID_GENE).
- ``print()`` -> the gene's log (``[gene] line`` on stderr), never stdout:
  see :mod:`rotifer.genes.prints`.
- run past the deadline -> ``GeneFailed``.  A contained gene's process is
  killed by its parent at the deadline.  A trusted gene's deadline is
  enforced with ``SIGALRM`` when it runs in the main thread (the CLI's case);
  in another thread it cannot be interrupted and runs to completion.
"""

from __future__ import annotations

import inspect
import json
import signal
import threading
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from rotifer.genes.errors import GeneFailed, GeneRejected, InvalidGene, rejection_of
from rotifer.genes.jsonvalue import problem_of
from rotifer.genes.prints import prints_to_log
from rotifer.memory.errors import AgentMemoryError
from rotifer.memory.signals import STOP_SIGNALS

if TYPE_CHECKING:
    from rotifer.genes.gene import Gene

    # Speed: for annotations only, so a gene's process does not import the store.
    from rotifer.memory import GeneMemoryAccess

LogSink = Callable[[str, str], None]
"""``sink(gene_name, line)``: where ``ctx.log`` lines go."""


@dataclass(frozen=True)
class GeneInfo:
    """What a gene may know about itself (``ctx.gene``)."""

    name: str
    domain: str
    version: str
    v2_id: str | None


@dataclass
class GeneContext:
    """The ``ctx`` argument of ``express(input, ctx)``.

    ``memory`` is the agent's memory seen as this gene (or a refusing view:
    ``rotifer run``, or a gene without a v2 id); ``agent`` the agent's name
    (None when the gene runs alone; the temporary id under ``rotifer test``);
    ``log(message)`` records a line for the runner (stderr in the CLI).
    """

    memory: GeneMemoryAccess
    gene: GeneInfo
    agent: str | None = None
    logs: list[str] = field(default_factory=list)
    _sink: LogSink | None = field(default=None, repr=False)

    def log(self, *parts: object) -> None:
        line = " ".join(str(p) for p in parts)
        self.logs.append(line)
        if self._sink is not None:
            self._sink(self.gene.name, line)


class _Deadline(BaseException):
    """Raised into the gene by SIGALRM; a BaseException so ``except Exception``
    in the gene does not swallow it."""


class Source(Protocol):
    """What running a Python gene needs of it: a :class:`~rotifer.genes.gene.Gene`,
    or what a contained child is sent of one."""

    @property
    def name(self) -> str: ...
    @property
    def code(self) -> bytes: ...
    @property
    def code_file(self) -> CodeFile: ...


class CodeFile(Protocol):
    """A gene's code file as running it needs it: its path (``str()``) and its
    name (a :class:`~pathlib.Path`, or the contained child's
    :class:`~rotifer.genes.contain.pychild.CodeFile`, which spares the fork
    server importing :mod:`pathlib`)."""

    @property
    def name(self) -> str: ...


def _load_express(gene: Source) -> Callable[..., Any]:
    filename = str(gene.code_file)
    try:
        source = gene.code.decode("utf-8")
    except UnicodeDecodeError:
        raise GeneFailed(f"gene '{gene.name}': {gene.code_file.name} is not UTF-8") from None
    try:
        code = compile(source, filename, "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise GeneFailed(
            f"gene '{gene.name}': {gene.code_file.name} line {exc.lineno}: "
            f"SyntaxError: {exc.msg}"
        ) from None
    module = types.ModuleType(f"rotifer_gene_{gene.name}")
    module.__file__ = filename
    try:
        exec(code, module.__dict__)
    except AgentMemoryError:
        raise
    except GeneRejected:
        raise
    except Exception as exc:
        raise GeneFailed(
            f"gene '{gene.name}' failed while loading: {type(exc).__name__}: {exc}"
        ) from None
    express = module.__dict__.get("express")
    if not callable(express):
        raise InvalidGene(
            f"gene '{gene.name}': {gene.code_file.name} defines no function express(input, ctx)"
        )
    if inspect.iscoroutinefunction(express) or inspect.isasyncgenfunction(express):
        raise GeneFailed(not_synchronous(gene.name))
    return express  # type: ignore[no-any-return]


def not_synchronous(name: str) -> str:
    """The one message for an ``async def express`` (at wrap and at run time)."""
    return (f"gene '{name}': express must be a plain (synchronous) function: async def is "
            "not supported (rotifer calls express and uses what it returns)")


def _call(gene: Source, express: Callable[..., Any], input: Any, ctx: GeneContext) -> Any:
    output = express(input, ctx)
    if inspect.iscoroutine(output):
        output.close()  # never awaited: closing it keeps Python from warning about it
        raise GeneFailed(not_synchronous(gene.name))
    if inspect.isasyncgen(output):
        raise GeneFailed(not_synchronous(gene.name))
    return output


def _as_json(gene: Source, output: Any) -> Any:
    try:
        text = json.dumps(output, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        why = problem_of(output, "output") if not isinstance(exc, RecursionError) else None
        raise GeneFailed(f"gene '{gene.name}' returned a value that is not JSON: "
                         f"{why or exc}") from None
    return json.loads(text)




class _Interrupt:
    """While a gene runs in the main thread: a stop signal (SIGINT, or SIGTERM
    and SIGHUP when a Python handler raises for them) is recorded, then handled
    as before (normally: ``KeyboardInterrupt`` or a subclass of it), so a
    ``KeyboardInterrupt`` the gene raised itself can be told from the user's
    Ctrl-C or a real SIGTERM."""

    def __init__(self, active: bool) -> None:
        self.active = active
        self.seen = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _Interrupt:
        if not self.active:
            return self
        for sig in STOP_SIGNALS:
            previous = signal.getsignal(sig)
            # SIGINT's default raises KeyboardInterrupt; other signals' defaults
            # end the process, so only Python handlers are wrapped for them.
            if callable(previous) or (sig == signal.SIGINT and previous is signal.SIG_DFL):
                self._previous[sig] = previous
                signal.signal(sig, self._on_signal)
        return self

    def _on_signal(self, signum: int, frame: types.FrameType | None) -> None:
        self.seen = True
        previous = self._previous.get(signum)
        if callable(previous):
            previous(signum, frame)
        else:  # SIGINT with SIG_DFL
            raise KeyboardInterrupt

    def swallowed(self) -> bool:
        """A SIGINT came that should have raised KeyboardInterrupt (the handler
        was Python's default) and yet the gene returned."""
        return self.seen and self._previous.get(signal.SIGINT) in (
            signal.default_int_handler, signal.SIG_DFL)

    def __exit__(self, *exc: object) -> None:
        for sig, previous in self._previous.items():
            # A handler may have replaced ours meanwhile (the CLI ignores a second
            # SIGTERM while it cleans up): that one stays.
            if signal.getsignal(sig) == self._on_signal:
                signal.signal(sig, previous)


def run_python_gene(gene: Gene, input: Any, memory: GeneMemoryAccess, *,
                    deadline_s: float = 10.0, agent: str | None = None,
                    log_sink: LogSink | None = None, check: bool = False) -> Any:
    """Run ``gene`` (kind ``python``) on ``input`` in this process, with
    ``ctx.memory = memory`` (a trusted gene; a contained one runs in a child:
    :mod:`rotifer.genes.contain.python_host`)."""
    info = GeneInfo(name=gene.name, domain=gene.domain, version=gene.phenotype.version,
                    v2_id=gene.v2_id)
    return run_in_process(gene, info, input, memory, deadline_s=deadline_s, agent=agent,
                          log_sink=log_sink, check=check)


def run_in_process(gene: Source, info: GeneInfo, input: Any, memory: GeneMemoryAccess, *,
                   deadline_s: float = 10.0, agent: str | None = None,
                   log_sink: LogSink | None = None, check: bool = False) -> Any:
    """Run the gene's code in this process (``deadline_s`` 0: no alarm).
    ``check``: only load it (its module runs, ``express`` must be a plain
    function) and return None, with the errors a run gives (``rotifer wrap``)."""
    ctx = GeneContext(memory=memory, gene=info, agent=agent, _sink=log_sink)
    main = threading.current_thread() is threading.main_thread()
    use_alarm = deadline_s > 0 and main and hasattr(signal, "setitimer")
    previous: Any = None

    def on_alarm(signum: int, frame: types.FrameType | None) -> None:
        raise _Deadline()

    interrupt = _Interrupt(main)
    try:
        if use_alarm:
            previous = signal.signal(signal.SIGALRM, on_alarm)
            signal.setitimer(signal.ITIMER_REAL, deadline_s)
        try:
            with interrupt, prints_to_log(gene.name, log_sink):
                express = _load_express(gene)
                output = None if check else _call(gene, express, input, ctx)
        finally:
            if use_alarm:
                signal.setitimer(signal.ITIMER_REAL, 0)
    except _Deadline:
        raise GeneFailed(f"gene '{gene.name}' ran past its deadline of {deadline_s:g} s") from None
    except KeyboardInterrupt:
        if interrupt.seen:
            raise  # the user's Ctrl-C
        raise GeneFailed(f"gene '{gene.name}' crashed: KeyboardInterrupt (raised by the gene "
                         "itself)") from None
    except (AgentMemoryError, GeneRejected, GeneFailed, InvalidGene):
        raise
    except RecursionError:
        raise GeneFailed(f"gene '{gene.name}' crashed: RecursionError: too deep") from None
    except SystemExit as exc:
        raise GeneFailed(f"gene '{gene.name}' called exit({exc.code!r})") from None
    except BaseException as exc:  # Exception, and a gene's own BaseException subclasses
        raise GeneFailed(f"gene '{gene.name}' crashed: {type(exc).__name__}: {exc}") from None
    finally:
        if use_alarm:
            signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
    if interrupt.swallowed():
        raise KeyboardInterrupt  # Ctrl-C the gene swallowed: the user still wants out
    output = _as_json(gene, output)
    rejection = rejection_of(output)
    if rejection is not None:
        raise rejection
    return output
