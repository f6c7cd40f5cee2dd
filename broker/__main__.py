"""`python -m broker` = the `rmqd` command."""

from broker.cli import main

raise SystemExit(main())
