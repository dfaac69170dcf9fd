"""python -m inreplay.learner: the learner process (see learner.learner)."""

from inreplay.learner.learner import exit_now, main

exit_now(main())
