"""``python -m opt`` is the ``hetopt`` command."""

from opt.cli import main

raise SystemExit(main())
