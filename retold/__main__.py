"""``python -m retold`` is the ``retold`` command."""

from retold.cli import main

main()
