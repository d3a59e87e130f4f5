"""Semantic search's vectors as memory entries.

An item put with an index configured gets one more entry beside it: the
*vector entry*, under the vector root (``langgraph/`` -> ``langgraph.vectors/``,
never a prefix of an item key) at the same path as the item::

    langgraph/users/alice/prefs  ->  langgraph.vectors/users/alice/prefs

It is a ``CACHE`` entry (recomputable from the item, so cleanup takes it
before any item of another category) with the item's own access and retention
policies, written by the same caller right after the item; so it counts toward
the quota, a gene may read it exactly when it may read the item, it expires
with the item and it moves with the agent.  Its value is a one-line JSON header
-- the SHA-256 of the item's stored bytes it was computed from, the dimensions,
the path of each vector -- then the unit vectors as little-endian float32 (numpy computes the
similarities).  A
vector whose item is gone, unreadable or changed since (the digest differs) is
never used.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .keys import ROOT

_HEADER_END = b"\n"
_FLOAT32 = np.dtype("<f4")  # little-endian float32 on every machine

#: Unit vectors, float32 (one, or one per row).
Unit = NDArray[Any]


def vector_root(root: str = ROOT) -> str:
    """Where the vector entries of items under ``root`` live."""
    return root[:-1] + ".vectors/"


def vector_key(item_key: str, root: str = ROOT) -> str:
    """The vector entry's key of the item whose memory key is ``item_key``."""
    return vector_root(root) + item_key[len(root):]


def digest(item_bytes: bytes) -> str:
    return hashlib.sha256(item_bytes).hexdigest()[:32]


def unit(vector: list[float], dims: int | None) -> Unit:
    """``vector`` scaled to length 1 (a zero vector stays zero), as float32;
    ValueError when it is not ``dims`` long (the index's ``dims``)."""
    if dims is not None and len(vector) != dims:
        raise ValueError(f"the embedding has {len(vector)} dimensions; the index says "
                         f"dims={dims}")
    found = np.asarray(vector, dtype=np.float64)
    norm = float(np.linalg.norm(found))
    return (found / norm if norm else found).astype(_FLOAT32)


@dataclass(frozen=True, slots=True)
class Vectors:
    """The vectors of one item: the digest of the bytes they were computed from
    and one unit vector per indexed text (its path), the rows of ``units``."""

    digest: str
    paths: tuple[str, ...]
    units: Unit  # shape (len(paths), dims)

    @classmethod
    def of(cls, item_digest: str, vectors: list[tuple[str, Unit]]) -> Vectors:
        paths = tuple(path for path, _ in vectors)
        return cls(item_digest, paths, np.stack([vector for _, vector in vectors]))

    def encode(self) -> bytes:
        dims = int(self.units.shape[1]) if self.units.ndim == 2 else 0
        header = json.dumps({"digest": self.digest, "dims": dims, "paths": list(self.paths)},
                            separators=(",", ":")).encode() + _HEADER_END
        return header + self.units.astype(_FLOAT32).tobytes()

    @classmethod
    def decode(cls, data: bytes) -> Vectors | None:
        """The vectors in a vector entry's value, or ``None`` if it is not one."""
        end = data.find(_HEADER_END)
        try:
            header = json.loads(data[:end])
            dims, paths, found = int(header["dims"]), tuple(header["paths"]), header["digest"]
            units = np.frombuffer(data, dtype=_FLOAT32, offset=end + 1)
        except (ValueError, KeyError, TypeError):
            return None
        if dims < 1 or units.size != dims * len(paths) or not isinstance(found, str):
            return None
        return cls(found, paths, units.reshape(len(paths), dims))

    def score(self, query: Unit) -> float | None:
        """Cosine similarity with the (unit) query: the best over the item's
        vectors, as LangGraph's stores pool them; ``None`` without vectors or
        when the dimensions differ."""
        if not self.paths or self.units.shape[1] != query.shape[0]:
            return None
        return float((self.units @ query).max())
