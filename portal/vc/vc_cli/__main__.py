"""``python -m vc_cli``: the same as ``vc``."""

import sys

from vc_cli.main import main

sys.exit(main())
