"""``python -m plateau_lib COMMAND``: every command of the project (``plateau_lib.commands``)."""
from plateau_lib.commands import main

raise SystemExit(main())
