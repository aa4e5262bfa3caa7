"""``python -m minikafka`` = the ``minikafka`` command."""

import sys

from .cli import main

sys.exit(main())
