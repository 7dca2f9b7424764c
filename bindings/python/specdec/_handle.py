"""Native handles the package owns: each freed exactly once, after the
objects that borrow it.

Lifetimes: a Context keeps its Model alive, a Session its Contexts, an
Engine its Session, so no object is freed before one that borrows it.
close() (or leaving a `with` block) frees at once; otherwise the garbage
collector does, and at the latest the interpreter's exit.
"""

from __future__ import annotations

import weakref
from typing import Callable, Optional


class _Handle:
    """A native handle freed exactly once: by close(), by the garbage collector,
    or at exit. `keep` holds the objects the handle borrows, so that they are
    freed after it whatever order the collector picks."""

    _handle: Optional[int]

    def _own(self, handle: int, free: Callable[[int], None], *keep) -> None:
        self._handle = handle
        self._dependents: "weakref.WeakSet[_Handle]" = weakref.WeakSet()
        self._finalizer = weakref.finalize(self, _free, free, handle, keep)
        for parent in keep:
            if isinstance(parent, _Handle):
                parent._dependents.add(self)

    @property
    def handle(self) -> int:
        """The native pointer; ValueError once closed."""
        if self._handle is None:
            raise ValueError(f"{type(self).__name__} is closed")
        return self._handle

    @property
    def closed(self) -> bool:
        return self._handle is None

    def close(self) -> None:
        """Frees the native object now (idempotent), after closing the objects
        that borrow it (a Model's contexts, a Context's sessions and engines)."""
        if getattr(self, "_handle", None) is not None:
            self._handle = None
            for dependent in list(self._dependents):
                dependent.close()
            self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _free(free: Callable[[int], None], handle: int, keep) -> None:
    free(handle)
