"""``python -m explorer``: the command line of :mod:`explorer.cli`."""

from explorer.cli import main

if __name__ == "__main__":  # importing the module (e.g. the docs' autosummary) runs nothing
    raise SystemExit(main())
