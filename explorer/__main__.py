"""``python -m explorer``: the command line of :mod:`explorer.cli`."""

from explorer.cli import main

raise SystemExit(main())
