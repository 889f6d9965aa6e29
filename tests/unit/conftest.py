"""Make ``ansible_collections.ascend.kvpool`` importable from a plain checkout (no install needed)."""

import sys
from pathlib import Path

COLLECTIONS = Path(__file__).resolve().parents[2] / '.collections'
if str(COLLECTIONS) not in sys.path:
    sys.path.insert(0, str(COLLECTIONS))


def pytest_configure(config):
    config.addinivalue_line('markers', 'aisbench: runs the real ais_bench (opt-in: set KVPOOL_TEST_AIS_BENCH)')
