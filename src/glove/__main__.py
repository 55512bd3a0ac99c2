"""``python -m glove`` runs the ``glove`` command line."""

from glove.cli import main

main()
