"""``python -m minikafka`` = the ``minikafka`` command."""

import gc
import sys

gc.disable()  # for start-up (see cli.main): the cyclic collector stays off while the modules are imported
from .cli import main  # noqa: E402

sys.exit(main())
