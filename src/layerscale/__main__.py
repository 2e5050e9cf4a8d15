"""``python -m layerscale`` (and ``torchrun -m layerscale``) runs the command line."""

import sys

from .cli import main

sys.exit(main())
