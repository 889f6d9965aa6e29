"""The router scenario reuses the helpers of the instances scenario (molecule/instances/tests/instances_lib.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'instances' / 'tests'))
