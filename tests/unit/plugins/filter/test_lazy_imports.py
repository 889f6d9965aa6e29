"""The filter files import their logic on first use (plugin_utils/lazy.py): Ansible's Jinja2 plugin loader imports
every filter file of the collection in each worker that looks up any ascend.kvpool filter, so an import at the top
of one filter file was paid by every task using another (measured in docs/speed.md)."""

import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.ascend.kvpool.plugins.plugin_utils import lazy

COLLECTIONS = Path(__file__).resolve().parents[4] / '.collections'
FILTERS = sorted(p.stem for p in (COLLECTIONS / 'ansible_collections/ascend/kvpool/plugins/filter').glob('*.py'))

PROBE = r'''
import importlib, sys
sys.path.insert(0, sys.argv[1])
for name in sys.argv[2:]:
    importlib.import_module('ansible_collections.ascend.kvpool.plugins.filter.' + name).FilterModule().filters()
print(' '.join(sorted(m for m in sys.modules if '.kvpool.plugins.plugin_utils.' in m
                      or '.kvpool.plugins.module_utils.' in m)))
'''


def test_reading_every_filter_map_imports_no_logic():
    out = subprocess.run([sys.executable, '-c', PROBE, str(COLLECTIONS)] + FILTERS, check=True,
                         capture_output=True, text=True).stdout.split()
    assert len(FILTERS) >= 8
    assert out == ['ansible_collections.ascend.kvpool.plugins.plugin_utils.lazy']


def test_a_lazy_function_imports_at_the_first_call_and_keeps_errors():
    size_bytes = lazy.function('plugin_utils.sizes', 'size_bytes')
    assert size_bytes.__name__ == 'size_bytes'
    assert size_bytes('2GB') == 2 * 1024 ** 3
    with pytest.raises(ValueError):
        size_bytes('two')
    with pytest.raises(AttributeError):
        lazy.module('plugin_utils.sizes').no_such_name  # noqa: B018  # the read is the test
