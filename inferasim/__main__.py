"""``python -m inferasim``: the ``inferasim`` command."""

from inferasim._entry import main

if __name__ == "__main__":
    raise SystemExit(main())
