"""The ``rotifer`` console script: Ctrl-C is under control from its first line.

A ``KeyboardInterrupt`` that arrives while the command's modules are still
being imported (click, the package), before :func:`rotifer.cli.main.run` takes
over, is reported like any other: one ``INTERRUPTED: interrupted`` line on
stderr, status 130, no traceback.  Once the command has its status, Ctrl-C gets
the operating system's default action for the rest of the exit (the process
ends at once, silently), so that a signal during the interpreter's shutdown
cannot print a traceback either.

So this module imports only what the interpreter has loaded before any script
runs (``os``, ``sys`` and ``_signal``, the C half of ``signal``; ``import
signal`` itself runs ``enum``, ``functools`` and ``collections``, and even
``from __future__ import ...`` is a module to find): a Ctrl-C could land in
any of those.  What no code of rotifer can cover is what runs before this
module does: the interpreter's start-up (``site``, the first tens of
milliseconds) and the console script's import of this module (a millisecond or
two).  A Ctrl-C there is Python's, with its traceback.
"""

import _signal  # type: ignore[import-not-found,unused-ignore]  # signal's C half, preloaded
import os
import sys


def interrupted_line() -> bytes:
    """The line for a Ctrl-C.  On a terminal it starts on a line of its own (the
    terminal has echoed ``^C`` where the cursor was); piped, there is no blank line."""
    try:
        fresh = os.isatty(2)
    except OSError:  # pragma: no cover - no stderr at all
        fresh = False
    return (b"\n" if fresh else b"") + b"INTERRUPTED: interrupted\n"


#: The commands that run genes: ``rotifer [--project DIR] agent run|run|test ...``.
_RUNS_GENES = (["agent", "run"], ["run"], ["test"])


def _command(argv: list[str]) -> tuple[list[str], str | None]:
    """``argv`` without its leading ``--project DIR``, and that DIR (None: not given)."""
    args, project = list(argv), None
    while args[:1] == ["--project"]:
        project, args = (args[1] if len(args) > 1 else None), args[2:]
    if args[:1] and args[0].startswith("--project="):
        project, args = args[0].partition("=")[2], args[1:]
    return args, project


def runs_genes(argv: list[str]) -> bool:
    """Whether ``argv`` (without the program) is a command that runs genes."""
    args, _ = _command(argv)
    return any(args[:len(command)] == command for command in _RUNS_GENES)


def trusts_every_gene(argv: list[str]) -> bool:
    """Whether the command's genes are all trusted, so that none will need the
    fork server: ``run``/``test`` with ``--trust``, or ``agent run NAME`` whose
    agent file (``.rotifer/agents/NAME.json``) trusts each of its genes.  A
    guess for speed only, never a decision: False whenever unsure (the server
    then starts ahead as before), and a gene that does need the server starts it
    at its run whatever this said.  Speed: a trusted one-gene ``agent run``
    neither starts an interpreter beside it nor waits for one at exit."""
    args, project = _command(argv)
    if args[:1] in (["run"], ["test"]):
        return "--trust" in args[:args.index("--")] if "--" in args else "--trust" in args
    if args[:2] != ["agent", "run"] or len(args) < 3 or args[2].startswith("-"):
        return False
    try:
        root = project or os.environ.get("ROTIFER_PROJECT") or None
        if root is None:
            here = os.getcwd()
            while not os.path.isdir(os.path.join(here, ".rotifer")):
                parent = os.path.dirname(here)
                if parent == here:
                    return False
                here = parent
            root = here
        with open(os.path.join(root, ".rotifer", "agents", args[2] + ".json"), "rb") as f:
            doc = _json_doc(f.read().decode("utf-8"))
        if not isinstance(doc, dict):
            return False
        genes, trust = doc["genes"], doc["containment"]["trust"]
        if not (isinstance(genes, list) and isinstance(trust, list)):
            return False
        return bool(genes) and all(isinstance(g, str) and g in trust for g in genes)
    except (OSError, ValueError, KeyError, TypeError, StopIteration, RecursionError):
        return False


class _Strict:
    """What the C half of ``json`` reads of its decoder: ``json.loads``'s defaults
    (a constant such as ``NaN`` is refused: ``parse_constant`` is not callable)."""

    strict = True
    object_hook = object_pairs_hook = parse_constant = None
    parse_float, parse_int = float, int


def _json_doc(text: str) -> object:
    """One JSON value (StopIteration or ValueError: none, or more than one).
    Speed: ``import json`` imports ``re`` and compiles its patterns (~35 M
    instructions), which the fork server's start would wait for; the C scanner
    alone does not."""
    import _json  # type: ignore[import-not-found,unused-ignore]

    text = text.strip(" \t\n\r")
    value, end = _json.make_scanner(_Strict())(text, 0)  # type: ignore[arg-type]
    if end != len(text):
        raise ValueError("more than one JSON value")
    return value


def main() -> None:
    """Run the command line and exit with its status."""
    try:
        try:
            if runs_genes(sys.argv[1:]) and not trusts_every_gene(sys.argv[1:]):
                # Speed: the fork server of contained Python genes starts now,
                # before this process imports anything more (click, the package,
                # even subprocess), so its interpreter starts beside all of that,
                # not at the first gene nor after a part of it.  How (a fork of
                # this process that exec's the server at once, holding nothing
                # of it) and why that is safe: rotifer/genes/contain/launch.py.
                # A command whose genes turn out not to need it (WASM, trusted)
                # pays a server start beside it, killed at exit.
                from rotifer.genes.contain.launch import start_early

                start_early()
            from rotifer.cli.main import run

            status = run(sys.argv[1:])
        finally:
            _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
    except KeyboardInterrupt:  # before run() could catch it, or after it returned
        _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
        status = 130
        try:  # noqa: SIM105 - contextlib is one more module to import here
            os.write(2, interrupted_line())
        except OSError:  # pragma: no cover - stderr closed
            pass
    sys.exit(status)


def console() -> None:
    """The ``rotifer`` console script: :func:`main`, then the end of the process
    without the interpreter's teardown.

    What the interpreter's own exit does that matters is done first, in its
    order: wait for the threads that are not daemons, run the ``atexit``
    handlers (the fork server's shutdown among them), flush stdout and stderr;
    then ``os._exit`` with the status.  Skipped: freeing every module and
    object one by one -- ~30 M instructions of ``rotifer agent list`` (10% of
    it; docs/benchmarks.md, "Start-up").  Whatever rotifer writes is written
    and closed before (the audit log is written with ``os.write``, stores are
    closed by the commands).  If flushing fails (stdout is a pipe its reader
    closed) the interpreter's own exit takes over and reports it as before."""
    try:
        main()
        status: str | int | None = 0
    except SystemExit as exc:
        status = exc.code
    if status is None:
        status = 0
    if not isinstance(status, int):
        sys.exit(status)
    import atexit

    threading = sys.modules.get("threading")
    if threading is not None:
        threading._shutdown()  # what Py_FinalizeEx calls first
    atexit._run_exitfuncs()
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except BaseException:  # the interpreter's exit reports it, as before
        sys.exit(status)
    os._exit(status & 0xFF)
