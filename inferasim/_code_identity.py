"""What identifies a piece of user code in a sweep store key.

A function is known by its module and qualified name *and* by what it
computes: its bytecode, constants (nested functions' code too), names,
defaults, the values its closure captured and the values of the globals it
reads. Two functions with the same ``__qualname__`` (two lambdas, a
function redefined in a notebook cell, the same name in two loops) get
different identities unless they are the same code over the same values.
A class defined by the user is known by its name and the identities of the
functions, properties and values in its body.

Code from inferasim itself, the standard library and installed packages is
known by module and name alone (it changes only with a new version), like
a string naming a built-in policy.

Values are described by the ``token`` callback of :mod:`inferasim.sweep`,
which refuses (ValueError) what it cannot describe: a function capturing
such a value is refused with it.
"""

from __future__ import annotations

import dis
import hashlib
import sys
import sysconfig
import types
from collections.abc import Callable
from functools import cache
from typing import Any

__all__ = ["is_library", "function_identity", "class_identity"]

Token = Callable[[Any, str], Any]


@cache
def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    return tuple(sorted(roots))


def is_library(module: str | None) -> bool:
    """Whether code of ``module`` is inferasim's, the standard library's or an installed package's.

    Examples
    --------
    >>> is_library("inferasim.sim.router"), is_library("json"), is_library("__main__")
    (True, True, False)
    """
    if not module or module == "__main__":
        return False
    top = module.partition(".")[0]
    if top == "inferasim" or top in sys.builtin_module_names or top in sys.stdlib_module_names:
        return True
    mod = sys.modules.get(module)
    path = getattr(mod, "__file__", None)
    if path is None:
        return False
    return any(str(path).startswith(root) for root in _library_roots())


def _code_digest(code: types.CodeType) -> str:
    """sha256 of what a code object computes (not where it was written)."""
    h = hashlib.sha256()
    for part in (
        code.co_code,
        repr(code.co_names).encode(),
        repr(code.co_varnames).encode(),
        repr(code.co_freevars).encode(),
        repr(code.co_cellvars).encode(),
        repr((code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount,
              code.co_flags)).encode(),
    ):
        h.update(part)
        h.update(b"\0")
    for const in code.co_consts:
        h.update(_code_digest(const).encode() if isinstance(const, types.CodeType)
                 else repr(const).encode())
        h.update(b"\0")
    return h.hexdigest()


def _global_names(code: types.CodeType) -> list[str]:
    """Names a code object (and the code nested in it) reads as globals."""
    names: set[str] = set()
    for ins in dis.get_instructions(code):
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and isinstance(ins.argval, str):
            names.add(ins.argval)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names.update(_global_names(const))
    return sorted(names)


def _value(value: Any, where: str, token: Token, seen: set[int]) -> Any:
    if isinstance(value, types.ModuleType):
        return {"module": value.__name__}
    if isinstance(value, types.FunctionType):
        return function_identity(value, where, token, seen)
    if isinstance(value, type):
        return class_identity(value, where, token, seen)
    return token(value, where)


def function_identity(fn: types.FunctionType, where: str, token: Token,
                      seen: set[int] | None = None) -> Any:
    """A JSON-able identity of a Python function (see the module docstring).

    Examples
    --------
    Two lambdas of a notebook (module ``__main__``):

    >>> tok = lambda v, where: repr(v)
    >>> f = eval("lambda x: x + 1", {"__name__": "__main__"})
    >>> g = eval("lambda x: x + 2", {"__name__": "__main__"})
    >>> f.__qualname__ == g.__qualname__
    True
    >>> function_identity(f, "f", tok) == function_identity(g, "g", tok)
    False
    >>> function_identity(f, "f", tok) == function_identity(eval("lambda x: x + 1", {"__name__": "__main__"}), "h", tok)
    True
    """
    name = f"{fn.__module__}.{fn.__qualname__}"
    if is_library(fn.__module__):
        return {"callable": name}
    seen = set() if seen is None else seen
    if id(fn) in seen:  # a recursive function: its code is already being described
        return {"callable": name, "recursive": True}
    seen = seen | {id(fn)}
    closure = []
    for var, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True):
        try:
            contents = cell.cell_contents
        except ValueError:  # an empty cell
            closure.append([var, "<empty>"])
            continue
        closure.append([var, _value(contents, f"{where} (captured {var!r})", token, seen)])
    glob = []
    for g in _global_names(fn.__code__):
        if g in fn.__globals__:
            glob.append([g, _value(fn.__globals__[g], f"{where} (global {g!r})", token, seen)])
    return {
        "callable": name,
        "code": _code_digest(fn.__code__),
        "defaults": token(fn.__defaults__, f"{where} (defaults)"),
        "kwdefaults": token(fn.__kwdefaults__, f"{where} (keyword defaults)"),
        "closure": closure,
        "globals": glob,
    }


_SKIP = frozenset({"__dict__", "__weakref__", "__module__", "__doc__", "__qualname__",
                   "__annotations__", "__slots__", "__firstlineno__", "__static_attributes__"})


def class_identity(cls: type, where: str, token: Token, seen: set[int] | None = None) -> Any:
    """A JSON-able identity of a class: by name, and for user code its body too.

    Examples
    --------
    >>> from inferasim.sim import KvCostRouter
    >>> class_identity(KvCostRouter, "routing", lambda v, w: repr(v))
    {'class': 'inferasim.sim.router.KvCostRouter'}
    """
    name = f"{cls.__module__}.{cls.__qualname__}"
    if is_library(cls.__module__):
        return {"class": name}
    seen = set() if seen is None else seen
    if id(cls) in seen:
        return {"class": name, "recursive": True}
    seen = seen | {id(cls)}
    body = []
    for attr, value in sorted(vars(cls).items()):
        dunder = attr.startswith("__") and attr.endswith("__")
        if attr in _SKIP or attr == "_abc_impl" or (
            dunder and not isinstance(value, (types.FunctionType, staticmethod, classmethod))
        ):
            continue
        at = f"{where} ({cls.__qualname__}.{attr})"
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, property):
            body.append([attr, [_value(f, at, token, seen) if f is not None else None
                                for f in (value.fget, value.fset, value.fdel)]])
            continue
        body.append([attr, _value(value, at, token, seen)])
    bases = [class_identity(b, where, token, seen) for b in cls.__bases__ if b is not object]
    return {"class": name, "bases": bases, "body": body}
