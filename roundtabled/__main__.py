"""``python -m roundtabled`` — the same as the ``roundtabled`` command."""

import sys

from roundtabled.cli import main

sys.exit(main())
