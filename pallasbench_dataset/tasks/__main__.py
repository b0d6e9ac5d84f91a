"""python -m pallasbench_dataset.tasks [NAME | --precisions]: the registry, for a reader."""

import sys

from pallasbench_dataset.tasks.info import main

sys.exit(main())
