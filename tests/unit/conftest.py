"""Make ``ansible_collections.ascend.kvpool`` importable from a plain checkout (no install needed)."""

import sys
from pathlib import Path

COLLECTIONS = Path(__file__).resolve().parents[2] / '.collections'
if str(COLLECTIONS) not in sys.path:
    sys.path.insert(0, str(COLLECTIONS))


def pytest_configure(config):
    config.addinivalue_line('markers', 'aisbench: runs the real ais_bench (opt-in: set KVPOOL_TEST_AIS_BENCH)')


# Hypothesis (the property tests of the parsers): a bounded number of examples per test is set where each test is
# defined; under CI the draw is derandomized (the same examples each run, so a red CI is reproducible) and no
# example database is written into the checkout.
try:
    from hypothesis import settings as _hypothesis_settings
except ImportError:  # pragma: no cover - hypothesis is in requirements.txt
    _hypothesis_settings = None
if _hypothesis_settings is not None:
    import os as _os

    _hypothesis_settings.register_profile('ci', derandomize=True, database=None, deadline=None)
    _hypothesis_settings.register_profile('dev', deadline=None)
    _hypothesis_settings.load_profile('ci' if _os.environ.get('CI') else 'dev')
