"""`python -m cli ...` is the `golem` command (what the stack uses to start its worker and dashboard)."""

import sys

from cli.main import main

sys.exit(main())
