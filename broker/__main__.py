"""`python -m broker [--config server.properties] [--override key=value ...]` — same as `ebb broker`."""

import sys

from broker.cli import main

if __name__ == "__main__":
    sys.exit(main(["broker", *sys.argv[1:]]))
