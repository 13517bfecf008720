"""``python -m opt`` is the ``hetopt`` command."""

from opt.app.cli import main

raise SystemExit(main())
