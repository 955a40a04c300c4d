"""``python -m plateau_lib.paper [options]`` is ``python -m plateau_lib paper [options]``: the paper queue
(``plateau_lib.paper_queue``), whose command line is read in ``plateau_lib.commands``."""
import sys

from plateau_lib.commands import main

if __name__ == "__main__":
    raise SystemExit(main(["paper", *sys.argv[1:]]))
