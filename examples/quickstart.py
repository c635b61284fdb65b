"""`make demo`: the quickstart story of retold/quickstart.py on a fresh store.

python examples/quickstart.py [store.sqlite]     # same as: retold demo [--store PATH]
"""

from retold.quickstart import main

if __name__ == "__main__":
    main()
