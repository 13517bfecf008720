"""``python -m opt`` is the ``hetopt`` command."""

from opt.cli.main import main

raise SystemExit(main())
