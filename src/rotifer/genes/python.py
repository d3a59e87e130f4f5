"""Running a Python gene: ``def express(input, ctx)`` in ``gene.py``.

Python genes are the contract's stand-in for the seed's "genes that run on
Node.js": they run in this process and get the four memory calls as
``ctx.memory``.

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
- raise anything else, or fail to load -> ``GeneFailed`` naming the gene and
  keeping the exception's type and message (no traceback: the user needs to
  know what broke, not where in the runtime)
- run past the deadline -> ``GeneFailed``.  The deadline is enforced with
  ``SIGALRM`` when the gene runs in the main thread (the CLI's case); in
  another thread it cannot be interrupted and runs to completion.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rotifer.genes.errors import GeneFailed, GeneRejected, InvalidGene, rejection_of
from rotifer.genes.jsonvalue import problem_of
from rotifer.memory import GeneMemoryAccess, MemoryError

if TYPE_CHECKING:
    from rotifer.genes.gene import Gene

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


def _load_express(gene: Gene) -> Callable[..., Any]:
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
    except MemoryError:
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
    return express  # type: ignore[no-any-return]


def _as_json(gene: Gene, output: Any) -> Any:
    try:
        text = json.dumps(output, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        why = problem_of(output, "output") if not isinstance(exc, RecursionError) else None
        raise GeneFailed(f"gene '{gene.name}' returned a value that is not JSON: "
                         f"{why or exc}") from None
    return json.loads(text)


def run_python_gene(gene: Gene, input: Any, memory: GeneMemoryAccess, *,
                    deadline_s: float = 10.0, agent: str | None = None,
                    log_sink: LogSink | None = None) -> Any:
    """Run ``gene`` (kind ``python``) on ``input`` with ``ctx.memory = memory``."""
    ctx = GeneContext(
        memory=memory,
        gene=GeneInfo(gene.name, gene.domain, gene.phenotype.version, gene.v2_id),
        agent=agent,
        _sink=log_sink,
    )
    use_alarm = (deadline_s > 0 and threading.current_thread() is threading.main_thread()
                 and hasattr(signal, "setitimer"))
    previous: Any = None

    def on_alarm(signum: int, frame: types.FrameType | None) -> None:
        raise _Deadline()

    try:
        if use_alarm:
            previous = signal.signal(signal.SIGALRM, on_alarm)
            signal.setitimer(signal.ITIMER_REAL, deadline_s)
        try:
            express = _load_express(gene)
            output = express(input, ctx)
        finally:
            if use_alarm:
                signal.setitimer(signal.ITIMER_REAL, 0)
    except _Deadline:
        raise GeneFailed(f"gene '{gene.name}' ran past its deadline of {deadline_s:g} s") from None
    except (MemoryError, GeneRejected, GeneFailed, InvalidGene):
        raise
    except RecursionError:
        raise GeneFailed(f"gene '{gene.name}' crashed: RecursionError: too deep") from None
    except Exception as exc:
        raise GeneFailed(f"gene '{gene.name}' crashed: {type(exc).__name__}: {exc}") from None
    except SystemExit as exc:
        raise GeneFailed(f"gene '{gene.name}' called exit({exc.code!r})") from None
    finally:
        if use_alarm:
            signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
    output = _as_json(gene, output)
    rejection = rejection_of(output)
    if rejection is not None:
        raise rejection
    return output


def _default_sink(name: str, line: str) -> None:  # pragma: no cover - used by the CLI
    print(f"[{name}] {line}", file=sys.stderr)


stderr_sink: LogSink = _default_sink
