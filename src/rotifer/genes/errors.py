"""Errors raised by the gene layer and everything above it.

Every error a user can cause carries a stable ``code`` so the CLI can print it
as ``CODE: message`` (the same form as :class:`rotifer.memory.MemoryError`)
and tests can assert on the code rather than on wording.

Codes used by the non-memory layers (documented in the README):

- ``PROJECT_NOT_FOUND``  no ``.rotifer/`` folder where the project was looked for
- ``GENE_NOT_FOUND``     no folder ``genes/NAME/``
- ``INVALID_GENE``       bad gene name, or a gene folder without a code file
- ``INVALID_PHENOTYPE``  ``phenotype.json`` missing, not JSON, or a field is wrong
- ``INVALID_INPUT``      an input that is not JSON, or does not fit ``inputSchema``
- ``INVALID_TESTS``      a ``tests.json`` that is malformed
- ``GENE_FAILED``        a gene crashed, trapped, timed out or returned non-JSON
- ``GENE_UNAVAILABLE``   the runtime for the gene's kind is not installed
- ``AGENT_EXISTS``, ``AGENT_NOT_FOUND``, ``INVALID_AGENT``, ``INVALID_COMPOSITION``
- ``COMPILE_FAILED``     ``rotifer compile`` could not turn ``gene.wat`` into ``gene.wasm``
- ``REGISTRY_ERROR``     ``.rotifer/genes.json`` cannot be read or is not the registry's format

A gene that *rejects* its input raises :class:`GeneRejected` with a code the
gene chose itself (for example ``INVALID_INPUT`` or a memory code it passed on).
"""

from __future__ import annotations


class RotiferError(Exception):
    """Base of every non-memory error with a user-facing code."""

    code: str = "ROTIFER_ERROR"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class ProjectNotFound(RotiferError):
    code = "PROJECT_NOT_FOUND"


class GeneNotFound(RotiferError):
    code = "GENE_NOT_FOUND"


class InvalidGene(RotiferError):
    code = "INVALID_GENE"


class InvalidPhenotype(RotiferError):
    code = "INVALID_PHENOTYPE"


class InvalidInput(RotiferError):
    code = "INVALID_INPUT"


class GeneUnavailable(RotiferError):
    code = "GENE_UNAVAILABLE"


class CompileFailed(RotiferError):
    code = "COMPILE_FAILED"


class InvalidTests(RotiferError):
    code = "INVALID_TESTS"


class RegistryError(RotiferError):
    code = "REGISTRY_ERROR"


class AgentExists(RotiferError):
    code = "AGENT_EXISTS"


class AgentNotFound(RotiferError):
    code = "AGENT_NOT_FOUND"


class InvalidAgent(RotiferError):
    code = "INVALID_AGENT"


class InvalidComposition(RotiferError):
    code = "INVALID_COMPOSITION"


class GeneRejected(RotiferError):
    """The gene looked at its input and refused it.

    Raised by a Python gene itself, or by the runtime when any gene's output
    is a lone ``{"__rotifer_error": {"code": ..., "message": ...}}`` object.
    The code is the gene's own, so the CLI prints e.g. ``INVALID_INPUT: ...``.
    """

    code = "GENE_REJECTED"

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message, code=code or "GENE_REJECTED")


class GeneFailed(RotiferError):
    """The gene crashed, trapped, ran out of time or produced no JSON."""

    code = "GENE_FAILED"

    def __init__(self, message: str) -> None:
        super().__init__(message)


def rejection_of(output: object) -> GeneRejected | None:
    """A lone ``{"__rotifer_error": {...}}`` output means the gene rejected its input.

    The one check every kind of gene uses, so a Python, Node or WASM gene
    rejects its input the same way.
    """
    if not (isinstance(output, dict) and list(output) == ["__rotifer_error"]):
        return None
    body = output["__rotifer_error"]
    code = body.get("code") if isinstance(body, dict) else None
    message = body.get("message") if isinstance(body, dict) else None
    return GeneRejected(code if isinstance(code, str) and code else "GENE_REJECTED",
                        message if isinstance(message, str) else "")
