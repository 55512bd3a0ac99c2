"""``gloved``: the daemon's composition root, its root tree and its process lifecycle.

:func:`main` is the ``gloved`` console script (``python -m glove.daemon`` too): it composes
the session service (:mod:`glove.session`) into the root tree :func:`build_root` builds
around the control server (:mod:`glove.control`), and :func:`run_daemon` runs it. This
package sits above both (docs/architecture.md, "Layers").
"""

from glove.daemon._main import main
from glove.daemon._root import FD_SOFT_LIMIT, build_root, raise_fd_limit, run_daemon, serve

__all__ = ["FD_SOFT_LIMIT", "build_root", "main", "raise_fd_limit", "run_daemon", "serve"]
