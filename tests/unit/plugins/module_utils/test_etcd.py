# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""etcd members of the HA masters: the command line, the etcdctl answers (recorded from the real etcd 3.4.23,
fixtures/etcd/), the cluster verdict, and the HA election judgement over the real mooncake_master 0.3.13.post1
/health answers; Hypothesis for the parsers."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import io
import json
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.ascend.kvpool.plugins.module_utils import _etcd, _mooncake
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'fixtures', 'etcd')
MEMBERS = [dict(name='node%d' % i, address='172.31.250.1%d' % i, peer_port=2380, client_port=2379) for i in (1, 2, 3)]
PARAMS = dict(name='node1', address='172.31.250.11', client_port=2379, peer_port=2380, metrics_port=0,
              data_dir='/var/lib/ascend-kvpool/etcd', cluster_token='kvpool-etcd', initial_cluster_state='new',
              heartbeat_interval=100, election_timeout=1000, auto_compaction_retention='1', extra_args=[])


def fixture(name):
    with io.open(os.path.join(FIXTURES, name), encoding='utf-8') as handle:
        return handle.read()


def test_argv_is_a_static_bootstrap_bound_to_the_node():
    argv = _etcd.build_etcd_argv('/usr/bin/etcd', PARAMS, MEMBERS)
    assert argv[0] == '/usr/bin/etcd'
    assert '--listen-peer-urls=http://172.31.250.11:2380' in argv
    assert '--listen-client-urls=http://172.31.250.11:2379,http://127.0.0.1:2379' in argv
    assert '--advertise-client-urls=http://172.31.250.11:2379' in argv
    assert ('--initial-cluster=node1=http://172.31.250.11:2380,node2=http://172.31.250.12:2380,'
            'node3=http://172.31.250.13:2380') in argv
    assert '--initial-cluster-state=new' in argv
    assert not [a for a in argv if a.startswith('--listen-metrics-urls')]


def test_argv_peer_tls_ipv6_metrics_and_existing():
    members = [dict(name='a', address='fd00::1', peer_port=2380, client_port=2379)]
    p = dict(PARAMS, name='a', address='fd00::1', metrics_port=2381, initial_cluster_state='existing',
             peer_cert_file='/c.pem', peer_key_file='/k.pem', peer_trusted_ca_file='/ca.pem')
    argv = _etcd.build_etcd_argv('etcd', p, members)
    assert '--initial-cluster=a=https://[fd00::1]:2380' in argv
    assert '--listen-metrics-urls=http://[fd00::1]:2381' in argv
    assert '--peer-client-cert-auth=true' in argv and '--initial-cluster-state=existing' in argv


@pytest.mark.parametrize('members, words', [
    ([], 'no etcd members'),
    (MEMBERS[:1] + [dict(MEMBERS[1], name='node1')], 'not unique: node1'),
    (MEMBERS[:1] + [dict(MEMBERS[1], address='172.31.250.11')], 'share the peer address'),
    ([dict(MEMBERS[0], name='bad name')], "name 'bad name'"),
    ([dict(MEMBERS[0], address=' ')], 'has no address'),
])
def test_members_problem_names_the_fix(members, words):
    assert words in _etcd.members_problem(members)
    assert _etcd.members_problem(MEMBERS) == ''


def test_managed_flags_refused():
    assert _etcd.managed_flag_in(['--initial-cluster=x']) == ('--initial-cluster=x', '--initial-cluster')
    assert _etcd.managed_flag_in(['--cert-file', '/x']) == ('--cert-file', '--cert-file')
    assert _etcd.managed_flag_in(['--snapshot-count=5000']) is None


def test_recorded_healthy_cluster_passes():
    health = _etcd.parse_endpoint_health(fixture('endpoint_health_3.json'))
    listed = _etcd.parse_member_list(fixture('member_list_3.json'))
    status = _etcd.parse_endpoint_status(fixture('endpoint_status_3.json'))
    assert all(h['health'] for h in health) and len(health) == 3
    assert sorted(m['name'] for m in listed) == ['n1', 'n2', 'n3']
    members = [dict(m, name='n%d' % (i + 1)) for i, m in enumerate(MEMBERS)]
    assert _etcd.cluster_problem(members, health, listed, status) == ''
    assert _etcd.leader_name(listed, status) == 'n2'


def test_recorded_member_down_is_named():
    health = _etcd.parse_endpoint_health(fixture('endpoint_health_one_down.json'))
    status = _etcd.parse_endpoint_status(fixture('endpoint_status_one_down.json'))
    listed = _etcd.parse_member_list(fixture('member_list_3.json'))
    members = [dict(m, name='n%d' % (i + 1)) for i, m in enumerate(MEMBERS)]
    problem = _etcd.cluster_problem(members, health, listed, status)
    assert_names(problem, 'not healthy', '172.31.250.13:2379', 'context deadline exceeded')
    assert len(status) == 2


def test_member_list_against_the_group():
    listed = _etcd.parse_member_list(fixture('member_list_3.json'))
    health = _etcd.parse_endpoint_health(fixture('endpoint_health_3.json'))
    members = [dict(m, name='n%d' % (i + 1)) for i, m in enumerate(MEMBERS)][:2]
    assert_names(_etcd.cluster_problem(members, health, listed, []), 'not in the etcd group', 'n3')
    members = [dict(m, name='n%d' % (i + 1)) for i, m in enumerate(MEMBERS)] + [
        dict(name='n4', address='172.31.250.14', peer_port=2380, client_port=2379)]
    assert 'not in the member list: n4' in _etcd.cluster_problem(members, health, listed, [])
    members = [dict(m, name='n%d' % (i + 1), peer_port=2390) for i, m in enumerate(MEMBERS)]
    assert_names(_etcd.cluster_problem(members, health, listed, []), 'peer URL differs', 'n1 has',
                 'http://172.31.250.11:2380')


@given(st.text(max_size=200))
def test_parsers_raise_only_value_error(text):
    for parse in (_etcd.parse_endpoint_health, _etcd.parse_member_list, _etcd.parse_endpoint_status):
        try:
            parse(text)
        except ValueError:
            pass


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
                    max_leaves=10))
def test_parsers_on_any_json(value):
    text = json.dumps(value)
    for parse in (_etcd.parse_endpoint_health, _etcd.parse_member_list, _etcd.parse_endpoint_status):
        try:
            parse(text)
        except ValueError:
            pass


def _master(name, rpc, serving, body, refused=None):
    """A master as the gate saw it; one that does not serve RPC refused the connection (it is up) unless ``refused``
    says otherwise (False: a timeout or an unreachable host)."""
    return dict(name=name, rpc=rpc, serving=serving, refused=(not serving) if refused is None else refused,
                view=_mooncake.parse_ha_health(body) if body else None)


def test_ha_one_leader_one_standby_recorded():
    leader = _master('node1', '172.31.250.11:50088', True, fixture('master_health_serving.json'))
    standby = _master('node2', '172.31.250.12:50088', False, fixture('master_health_standby.json'))
    view = _mooncake.ha_judgement([leader, standby])
    assert view == dict(leader='172.31.250.11:50088', leader_name='node1', standbys=['node2'], problem='')


def test_ha_warmup_and_no_leader_wait():
    warm = _master('node1', '172.31.250.11:50088', False, fixture('master_health_warmup.json'))
    standby = _master('node2', '172.31.250.12:50088', False, fixture('master_health_standby.json'))
    assert_names(_mooncake.ha_judgement([warm, standby])['problem'], 'no master serves RPC', 'node1 leader_warmup',
                 'node2 standby')


def test_ha_split_brain_and_disagreement_named():
    a = _master('node1', '172.31.250.11:50088', True, fixture('master_health_serving.json'))
    b = _master('node2', '172.31.250.12:50088', True, None)
    assert_names(_mooncake.ha_judgement([a, b])['problem'], 'more than one master', 'serves RPC', 'node1, node2')
    c = _master('node2', '172.31.250.12:50088', True, fixture('master_health_standby.json'))
    d = _master('node1', '172.31.250.11:50088', False, None)
    assert_names(_mooncake.ha_judgement([d, c])['problem'], 'node2 accepts RPC', 'standby, not serving')
    e = _master('node2', '172.31.250.12:50088', True, fixture('master_health_serving.json'))
    assert_names(_mooncake.ha_judgement([d, e])['problem'], 'node2 names', '172.31.250.11:50088 as leader',
                 '172.31.250.12:50088 serves')


def test_ha_old_release_without_admin_server():
    """A 0.3.9 standby answers nothing on its HTTP port: only the RPC ports decide."""
    masters = [_master('a', '10.0.0.1:50088', True, None), _master('b', '10.0.0.2:50088', False, None)]
    view = _mooncake.ha_judgement(masters)
    assert view['problem'] == '' and view['leader_name'] == 'a'


def test_ha_a_master_that_does_not_answer_at_all_is_no_standby():
    """A peer at a black-holed address: its RPC port neither accepts nor refuses (timed out) and its health endpoint
    gives nothing. It was counted as a standby and the gate passed; its state is unknown, and it may be the leader."""
    leader = _master('n1', '172.31.250.11:50088', True, fixture('master_health_serving.json'))
    silent = dict(_master('n2', '192.0.2.1:50088', False, None, refused=False), rpc_error='timed out')
    view = _mooncake.ha_judgement([leader, silent])
    assert view['standbys'] == [] and view['leader_name'] == 'n1'
    assert_names(view['problem'], 'n2: no answer from rpc 192.0.2.1:50088 (timed out) or health, state unknown',
                 'Fix', 'reachable', 'ha_peers')
    refused = _master('n2', '10.0.0.2:50088', False, None, refused=True)  # up, no RPC port: a standby (0.3.9)
    assert _mooncake.ha_judgement([leader, refused]) == dict(leader='172.31.250.11:50088', leader_name='n1',
                                                             standbys=['n2'], problem='')
    shown = _master('n2', '10.0.0.2:50088', False, fixture('master_health_standby.json'), refused=False)
    assert _mooncake.ha_judgement([leader, shown])['problem'] == ''  # RPC dropped, but its health shows standby


_VIEWS = st.one_of(st.none(), st.builds(
    lambda state, ready, leader: {'role': 'x', 'ha_state': state, 'service_ready': ready, 'leader_address': leader},
    st.sampled_from(['serving', 'standby', 'leader_warmup', '']), st.booleans(),
    st.sampled_from(['', 'm0:1', 'm1:1', 'm2:1'])))


@given(st.lists(st.tuples(st.booleans(), st.booleans(), _VIEWS), min_size=1, max_size=4))
def test_ha_judgement_never_counts_a_silent_master_as_standby(shown):
    """Any mix of serving / refused / silent masters and views: a master that showed nothing is never a standby and
    always fails the gate naming it (after a split brain, which is named first); no problem means exactly one
    serves and every other refused RPC or showed its state."""
    masters = [dict(name='m%d' % i, rpc='m%d:1' % i, serving=serving, refused=refused and not serving, view=view)
               for i, (serving, refused, view) in enumerate(shown)]
    out = _mooncake.ha_judgement(masters)
    silent = [m['name'] for m in masters if not m['serving'] and not m['refused'] and m['view'] is None]
    assert not set(silent) & set(out['standbys'])
    if silent and sum(m['serving'] for m in masters) < 2:
        for name in silent:
            assert '%s: no answer from rpc' % name in out['problem'] and 'state unknown' in out['problem']
    if not out['problem']:
        assert sum(m['serving'] for m in masters) == 1 and not silent
        assert len(out['standbys']) == len(masters) - 1


@given(st.text(max_size=300))
def test_parse_ha_health_never_raises(text):
    out = _mooncake.parse_ha_health(text)
    assert out is None or set(out) == {'role', 'ha_state', 'service_ready', 'leader_address'}


def test_ha_hints():
    assert 'STORE_USE_ETCD' in _mooncake.ha_hint('F1204 Etcd is not enabled in compilation')
    assert 'etcd members' in _mooncake.ha_hint('Failed to read current leader view: ETCD_OPERATION_ERROR')
    assert _mooncake.ha_hint('all fine') == ''


# --- joining a running cluster (fixtures recorded from etcd 3.4.23 on the mock cluster) ------------------------
NODE3 = 'http://172.31.250.13:2380'


def test_join_nothing_answers_is_a_static_bootstrap():
    assert _etcd.join_decision('node3', NODE3, None) == ('new', '')


def test_join_a_member_added_and_not_started_starts_existing():
    listed = _etcd.parse_member_list(fixture('member_list_added_unstarted.json'))
    action, member_id = _etcd.join_decision('node3', NODE3, listed)
    assert action == 'existing' and member_id == '%x' % 217484686316815082
    members = [dict(m, name='node%d' % (i + 1)) for i, m in enumerate(MEMBERS)]
    assert _etcd.joined_initial_cluster(listed, members, 'node3', NODE3) == (
        'node3=http://172.31.250.13:2380,node2=http://172.31.250.12:2380,node1=http://172.31.250.11:2380')


def test_join_a_member_not_listed_is_added_and_the_add_answer_is_the_new_list():
    listed = _etcd.parse_member_list(fixture('member_list_added_unstarted.json'))
    without = [m for m in listed if m['peer_urls'] != [NODE3]]
    assert _etcd.join_decision('node3', NODE3, without) == ('add', '')
    assert _etcd.parse_member_add(fixture('member_add_node3.json')) == listed


def test_join_a_started_member_without_data_is_lost_and_names_its_id():
    listed = _etcd.parse_member_list(fixture('member_list_3.json'))
    assert _etcd.join_decision('n3', NODE3, listed) == ('lost', '%x' % 2568371940115435271)
    assert _etcd.join_decision('other', NODE3, listed)[0] == 'taken'
    assert _etcd.join_decision('n3', 'http://172.31.250.99:2380', listed)[0] == 'renamed'


def test_join_a_late_member_of_a_static_bootstrap_bootstraps_too():
    """During a static bootstrap every member of --initial-cluster is listed by name, without client URLs until it
    started (etcd answers member list without a quorum)."""
    listed = [dict(m, client_urls=[]) for m in _etcd.parse_member_list(fixture('member_list_3.json'))]
    assert _etcd.join_decision('n3', NODE3, listed)[0] == 'new'


def test_installed_initial_flags_read_back_from_a_rendered_unit():
    from ansible_collections.ascend.kvpool.plugins.module_utils import _service
    argv = _etcd.build_etcd_argv('/usr/bin/etcd', dict(PARAMS, initial_cluster_state='existing'), MEMBERS)
    unit = _service.render_unit(_service.ServiceSpec('kvpool-etcd', 'etcd', argv))
    flags = _etcd.installed_initial_flags(unit)
    assert flags == {'--initial-cluster': 'node1=http://172.31.250.11:2380,node2=http://172.31.250.12:2380,'
                                          'node3=http://172.31.250.13:2380', '--initial-cluster-state': 'existing'}
    fresh = _etcd.build_etcd_argv('/usr/bin/etcd', PARAMS, MEMBERS[:1])
    assert _etcd.with_initial_flags(fresh, flags) == argv[:1] + [
        a if not a.startswith('--initial-cluster') else [x for x in argv if x.split('=')[0] == a.split('=')[0]][0]
        for a in fresh[1:]]
    assert _etcd.installed_initial_flags('') == {} and _etcd.installed_initial_flags(None) == {}


@given(st.text(max_size=300))
def test_installed_initial_flags_never_raises(text):
    out = _etcd.installed_initial_flags(text)
    assert out == {} or set(out) == set(_etcd.INITIAL_FLAGS)


@given(st.text(max_size=200))
def test_parse_member_add_raises_only_value_error(text):
    try:
        _etcd.parse_member_add(text)
    except ValueError:
        pass


# --- the masters' OpLog namespace (recorded from the real etcd behind the real 0.3.13.post1 master) ---------------

def test_the_recorded_log_of_the_new_format_is_read_as_such():
    keys, count = _etcd.parse_range_keys(fixture('oplog_range_batch.json'))
    assert count == 22 and len(keys) == 3 and keys[0] == '/oplog/exp7/batches/00000000000000000001'
    assert _etcd.oplog_format('exp7', keys) == ('batch', [])


def test_the_recorded_legacy_namespace_is_named_with_its_keys():
    keys, count = _etcd.parse_range_keys(fixture('oplog_range_legacy.json'))
    fmt, legacy = _etcd.oplog_format('pool9', keys)
    assert count == 3 and fmt == 'legacy'
    assert legacy == ['/oplog/pool9/00000000000000000001', '/oplog/pool9/00000000000000000002', '/oplog/pool9/latest']
    # the same keys seen under another cluster id are not this pool's
    assert _etcd.oplog_format('pool', keys) == ('empty', [])


def test_no_log_and_the_guarded_delete_answers():
    assert _etcd.parse_range_keys(fixture('oplog_range_empty.json')) == ([], 0)
    assert _etcd.parse_txn_deleted(fixture('oplog_txn_deleted.json')) == (True, 3)
    assert _etcd.parse_txn_deleted(fixture('oplog_txn_refused.json')) == (False, 0)


def test_the_requests_cover_exactly_the_cluster_prefix():
    body = _etcd.prefix_range_request('/oplog/a/', limit=100)
    assert base64.b64decode(body['key']) == b'/oplog/a/' and base64.b64decode(body['range_end']) == b'/oplog/a0'
    assert body['keys_only'] is True and body['limit'] == 100
    txn = _etcd.legacy_oplog_delete_txn('a')
    assert base64.b64decode(txn['compare'][0]['key']) == b'/oplog/a/durable_prefix'
    assert txn['compare'][0]['create_revision'] == '0'  # only while no log of the new format is there
    deleted = txn['success'][0]['request_delete_range']
    assert (base64.b64decode(deleted['key']), base64.b64decode(deleted['range_end'])) == (b'/oplog/a/', b'/oplog/a0')


@given(st.text(max_size=30))
def test_a_prefix_range_holds_every_key_under_it_and_no_other(tail):
    prefix = '/oplog/c/'
    end = _etcd.prefix_range_end(prefix)
    assert prefix.encode() <= (prefix + tail).encode('utf-8') < end
    assert not prefix.encode() <= b'/oplog/c0' < end and not prefix.encode() <= b'/oplog/b/' < end


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
                    max_leaves=10))
def test_a_peers_garbage_is_a_value_error_never_a_traceback(doc):
    for parse in (_etcd.parse_range_keys, _etcd.parse_txn_deleted):
        try:
            parse(json.dumps(doc))
        except ValueError:
            pass
