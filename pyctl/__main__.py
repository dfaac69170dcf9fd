"""python -m pyctl"""

import sys

from pyctl.cli import main

sys.exit(main())
