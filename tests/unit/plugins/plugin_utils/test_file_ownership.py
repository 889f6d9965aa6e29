# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The ownership rule of the roles that write files (plugin_utils/ownership.py, filter owned_file_problems; issue
32): what stat and slurp saw, in, the files the collection did not write, named with their variable and the fix,
out."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import hashlib

import pytest
import yaml

from ansible_collections.ascend.kvpool.plugins.filter.kvpool import FilterModule
from ansible_collections.ascend.kvpool.plugins.plugin_utils import ownership
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

DASH = '/etc/grafana/dash/kvpool-dashboard.json'
RECORD = '/etc/grafana/dash/.kvpool-dashboard.json.kvpool'
OURS = b'{"uid": "ascend-kvpool"}\n'
SD = '/etc/prometheus/file_sd/kvpool-router.yml'
CONF = '/etc/prometheus/prometheus.yml'


def sha(data):
    return hashlib.sha256(data).hexdigest()


def seen(files):
    """(stats, reads) as the role's looped stat and slurp tasks register them, for ``{path: bytes or kind}``."""
    stats, reads = [], []
    for path, data in files.items():
        if data == 'fifo':
            stats.append({'item': path, 'stat': {'exists': True, 'isreg': False, 'islnk': False, 'path': path}})
        elif data == 'link':
            stats.append({'item': path, 'stat': {'exists': True, 'isreg': False, 'islnk': True, 'path': path,
                                                 'lnk_source': '/dev/null'}})
        else:
            stats.append({'item': path, 'stat': {'exists': True, 'isreg': True, 'islnk': False, 'path': path,
                                                 'checksum': sha(data)}})
            reads.append({'item': {'item': path}, 'source': path, 'content': base64.b64encode(data).decode()})
    return {'results': stats}, {'results': reads}


def problems(files, entries, conffiles='', marks=()):
    stats, reads = seen(files)
    return FilterModule().filters()['owned_file_problems'](entries, stats, reads, conffiles, marks)


DASH_ENTRY = {'path': DASH, 'variable': 'kvpool_monitoring_dashboard_dir', 'kind': 'record', 'sha256': sha(OURS)}
SD_ENTRY = {'path': SD, 'variable': 'kvpool_monitoring_file_sd_dir', 'kind': 'header'}
CONF_ENTRY = {'path': CONF, 'variable': 'kvpool_monitoring_prometheus_config_path', 'kind': 'header',
              'package': 'prometheus', 'fix': 'set kvpool_monitoring_prometheus_config to false'}


def test_missing_files_and_the_collections_own_are_written():
    assert problems({}, [DASH_ENTRY, SD_ENTRY, CONF_ENTRY]) == []
    own = {SD: b'# Written by ascend.kvpool.kvpool_monitoring (cluster kvpool): targets\n- targets: []\n',
           CONF: b'# Ansible managed\n# Written by ascend.kvpool.kvpool_monitoring: scrape jobs\nglobal: {}\n',
           DASH: OURS}  # the bytes the role writes: an earlier release's copy, or a record lost after the write
    assert problems(own, [DASH_ENTRY, SD_ENTRY, CONF_ENTRY]) == []


def test_a_file_without_the_header_is_named_with_its_variable_and_the_fix():
    out = problems({SD: b'- targets: [10.0.0.1:9100]\n'}, [SD_ENTRY])
    assert len(out) == 1
    assert_names(out[0], SD, 'kvpool_monitoring_file_sd_dir', 'not written by ascend.kvpool',
                 '# Written by ascend.kvpool', 'not replaced', 'Fix: if it is yours, set kvpool_monitoring_file_sd_dir')


def test_an_earlier_releases_mark_is_the_roles():
    rules = {SD: b'---\n# Alert rules of ascend.kvpool (role kvpool_monitoring, docs/monitoring.md).\ngroups: []\n'}
    assert problems(rules, [SD_ENTRY], marks=['# Alert rules of ascend.kvpool (role kvpool_monitoring']) == []
    assert problems(rules, [SD_ENTRY]) != []


def test_the_packages_untouched_default_is_replaced_and_an_edited_one_is_not():
    default = b'# Sample config for Prometheus.\nglobal:\n  scrape_interval: 15s\n'
    conffiles = ' %s %s\n /etc/default/prometheus 0123 obsolete\n' % (CONF, hashlib.md5(default).hexdigest())
    assert problems({CONF: default}, [CONF_ENTRY], conffiles) == []
    out = problems({CONF: default + b'# mine\n'}, [CONF_ENTRY], conffiles)
    assert_names(out[0], CONF, 'not the prometheus package\'s default', 'set kvpool_monitoring_prometheus_config to '
                 'false')


def test_a_json_file_is_proven_by_the_record_beside_it():
    earlier = b'{"uid": "ascend-kvpool", "version": 1}\n'  # written by the role, before this release's dashboard
    record = ownership.record_text('kvpool_monitoring', sha(earlier)).encode()
    assert problems({DASH: earlier, RECORD: record}, [DASH_ENTRY]) == []
    # changed since the role wrote it
    out = problems({DASH: earlier + b' ', RECORD: record}, [DASH_ENTRY])
    assert_names(out[0], DASH, 'kvpool_monitoring_dashboard_dir', 'cannot prove', 'bytes are not the ones %s records'
                 % RECORD, 'Fix:')
    # no record, but the bytes an earlier release of the role wrote
    assert problems({DASH: earlier}, [dict(DASH_ENTRY, earlier_sha256=[sha(earlier)])]) == []
    # no record: someone else's dashboard of that name
    out = problems({DASH: b'{"uid": "theirs"}\n'}, [DASH_ENTRY])
    assert_names(out[0], DASH, 'no record %s beside it' % RECORD, 'set kvpool_monitoring_dashboard_dir to another path')
    # a record the collection did not write proves nothing
    out = problems({DASH: earlier, RECORD: b'sha256=%s\n' % sha(earlier).encode()}, [DASH_ENTRY])
    assert_names(out[0], RECORD, 'ownership record of %s' % DASH, 'not written by ascend.kvpool', 'move it away')


@pytest.mark.parametrize('kind', ['fifo', 'link'])
def test_what_is_not_a_regular_file_is_never_read_nor_replaced(kind):
    for entry in (SD_ENTRY, DASH_ENTRY):
        out = problems({entry['path']: kind}, [entry])
        assert_names(out[0], entry['path'], entry['variable'], 'symlink to /dev/null' if kind == 'link'
                     else 'not a regular file', 'not replaced')


def test_the_roles_record_header_is_the_rules():
    """roles/kvpool_monitoring writes the record in YAML: its header is the one record_text makes."""
    from pathlib import Path
    role = Path(__file__).resolve().parents[4] / 'roles' / 'kvpool_monitoring'
    header = yaml.safe_load((role / 'vars' / 'main.yml').read_text())['kvpool_monitoring__record_header']
    assert ownership.record_text('kvpool_monitoring', 'x').splitlines()[0] == header
    assert header.startswith(ownership.HEADER)


def test_an_entry_without_a_kind_is_a_filter_error():
    from ansible.errors import AnsibleFilterError
    with pytest.raises(AnsibleFilterError, match='kind'):
        problems({}, [{'path': SD}])
