"""Every public function, class and method carries a numpydoc docstring with a runnable example.

"Public" means listed in a module's ``__all__`` (and, for classes, methods
and properties not starting with ``_``). The examples themselves run as
doctests (pytest's ``--doctest-modules`` over ``inferasim/``).
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil

import pytest

import inferasim
from conftest import load_interpreted
from inferasim.sim.native import native_modules

MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(inferasim.__path__, prefix="inferasim.")
    if not m.name.rsplit(".", 1)[-1].startswith("_")
)


def _public_objects():
    seen = set()
    compiled = {name for name, how in native_modules().items() if how == "compiled"}
    for name in MODULES:
        # (mypyc drops docstrings: a compiled module's are read from its source)
        module = load_interpreted(name) if name in compiled else importlib.import_module(name)
        for attr in getattr(module, "__all__", []):
            obj = getattr(module, attr)
            if not (inspect.isfunction(obj) or inspect.isclass(obj)) or id(obj) in seen:
                continue
            if not getattr(obj, "__module__", "").startswith("inferasim"):
                continue
            seen.add(id(obj))
            yield f"{obj.__module__.removesuffix('__interpreted')}.{obj.__qualname__}", obj
            is_protocol = inspect.isclass(obj) and getattr(obj, "_is_protocol", False)
            if inspect.isclass(obj) and not issubclass(obj, BaseException) and not is_protocol:
                for member_name, member in vars(obj).items():
                    if member_name.startswith("_"):
                        continue
                    target = member.fget if isinstance(member, property) else member
                    if isinstance(target, (staticmethod, classmethod)):
                        target = target.__func__
                    if inspect.isfunction(target):
                        yield (
                            f"{obj.__module__.removesuffix('__interpreted')}."
                            f"{obj.__qualname__}.{member_name}",
                            target,
                        )


PUBLIC = dict(_public_objects())


def test_the_walk_finds_the_api():
    assert "inferasim.workload.core.Workload.from_synthetic" in PUBLIC
    assert len(PUBLIC) > 40


@pytest.mark.parametrize("qualname", sorted(PUBLIC))
def test_public_object_has_a_runnable_example(qualname):
    doc = inspect.getdoc(PUBLIC[qualname]) or ""
    assert doc.strip(), f"{qualname} has no docstring"
    obj = PUBLIC[qualname]
    if inspect.isclass(obj) and "Protocol" in [b.__name__ for b in obj.__mro__[1:]]:
        return  # an interface: its methods are documented, not run
    assert "Examples" in doc and ">>>" in doc, f"{qualname} lacks an Examples section with >>> lines"
    examples = doctest.DocTestParser().get_examples(doc)
    runnable = [e for e in examples if not e.options.get(doctest.SKIP)]
    assert runnable, f"{qualname}: every example is marked +SKIP, so none runs"


def test_an_all_skip_example_does_not_count():
    doc = "Examples\n--------\n>>> 1 + 1  # doctest: +SKIP\n2\n"
    examples = doctest.DocTestParser().get_examples(doc)
    assert examples and all(e.options.get(doctest.SKIP) for e in examples)
