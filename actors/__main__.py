"""python -m actors: one actor process (see actors.actor)."""

import sys

from actors.actor import main

sys.exit(main())
