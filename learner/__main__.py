"""python -m learner: the learner process (see learner.learner)."""

import sys

from learner.learner import main

sys.exit(main())
