"""python -m inreplay.actors: one actor process (see actors.actor)."""

import sys

from inreplay.actors.actor import main

sys.exit(main())
