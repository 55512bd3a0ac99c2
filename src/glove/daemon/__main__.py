"""``python -m glove.daemon``: ``gloved`` without its console script."""

from glove.daemon import main

main()
