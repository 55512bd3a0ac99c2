"""``python -m glove`` runs the ``glove`` command line.

``python -m`` puts the current directory first on ``sys.path``. Glove is often started from
a workspace that a contained agent could write, so that entry is dropped before anything
else is imported: a ``typer.py`` planted there must never run on the host. Prefer the
``glove`` console script or ``python -P -m glove``, which never add it (a planted ``glove/``
package would be found before this module runs).
"""

import os
import sys

if not sys.flags.safe_path and sys.path and sys.path[0] in ("", os.getcwd()):  # noqa: PTH109 - no pathlib before the repair
    del sys.path[0]

from glove.cli import main  # must follow the sys.path repair above

main()
