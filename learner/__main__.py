"""python -m learner: the learner process (see learner.learner)."""

from learner.learner import exit_now, main

exit_now(main())
