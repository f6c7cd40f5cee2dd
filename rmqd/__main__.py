"""`python -m rmqd` = the `rmqd` command."""

from rmqd.broker.cli import main

raise SystemExit(main())
