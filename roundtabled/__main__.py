"""``python -m roundtabled`` — the same as the ``roundtabled`` command."""

import sys

try:
    from roundtabled.cli import main
except KeyboardInterrupt:  # Ctrl-C while the package loads: quiet, as in main
    sys.exit(130)

sys.exit(main())
