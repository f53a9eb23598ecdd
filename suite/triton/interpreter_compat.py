"""One fix for the Triton interpreter (TRITON_INTERPRET=1) of older Triton releases under NumPy >= 2.5, and which
kernels were not defined for the interpreter at all.

The interpreter holds every scalar as a one-element 1-D NumPy array, and triton 3.6 turns one into a Python int
(a loop bound: ``tl.range(0, my_tiles)``) with ``int(array)``, which NumPy deprecated in 1.25 and refuses since 2.5
("only 0-dimensional arrays can be converted to Python scalars"), so every kernel with such a bound fails in the
interpreter. triton 3.9 squeezes the array first; ``install`` makes
any interpreter that patches ``tl.tensor`` do the same. It changes nothing where that is already so.

Called explicitly (never at import) by whoever turns the interpreter on: ``python -m suite.run`` on a machine
without a GPU, and the tests' conftest."""

from __future__ import annotations

import functools


def _index(self) -> int:
    return int(self.handle.data.squeeze())  # a scalar: one element, any number of dimensions


def install() -> bool:
    """Make the interpreter's ``tl.tensor.__index__`` squeeze its one-element array. Returns whether a patch was
    installed (False where this Triton has no such interpreter hook)."""
    try:
        from triton.runtime import interpreter
    except ImportError:
        return False
    original = getattr(interpreter, "_patch_lang_tensor", None)
    if original is None or getattr(original, "_pipesuite_squeezes", False):
        return original is not None

    @functools.wraps(original)
    def patch_lang_tensor(tensor, scope, *args, **kwargs):
        result = original(tensor, scope, *args, **kwargs)
        scope.set_attr(tensor, "__index__", _index)  # restored with the interpreter's own patches, in reverse order
        return result

    patch_lang_tensor._pipesuite_squeezes = True
    interpreter._patch_lang_tensor = patch_lang_tensor
    return True


def compiled_kernels() -> list[str]:
    """The ``triton.jit`` kernels of the suite's loaded Triton modules that do not run in the interpreter: where
    TRITON_INTERPRET=1 was set after their module was imported (it is read when a kernel is defined). Gluon kernels
    are compiled always and are not counted."""
    import sys

    from triton.runtime.jit import JITFunction

    return [
        f"{name}.{attr}"
        for name, module in list(sys.modules.items())
        if name.startswith("suite.triton.")
        for attr, value in list(vars(module).items())
        if type(value) is JITFunction  # (Gluon's is a subclass; the interpreter's is another class)
    ]
