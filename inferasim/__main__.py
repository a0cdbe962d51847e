"""``python -m inferasim``: the ``inferasim`` command."""

from inferasim.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
