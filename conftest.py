"""Collection rules for the whole repository (tests/conftest.py has the fixtures).

The modules mypyc compiles (``inferasim.sim.native.NATIVE_MODULES``) lose their
docstrings when compiled, so pytest's ``--doctest-modules`` skips their files;
tests/test_native.py runs those doctests on the interpreted source instead.
"""

from inferasim.sim.native import NATIVE_MODULES

collect_ignore = [name.replace(".", "/") + ".py" for name in NATIVE_MODULES]
