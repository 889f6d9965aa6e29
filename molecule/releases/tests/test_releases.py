"""The pre-flight catches of today's releases on the SIMULATED two-node cluster (docs/preflight.md).

Each test sets its faults (SIMULATED where hardware or vendor software is needed: mockctl fault driver_version,
cann_version, hugepages, glibc) or its misconfiguration (extra vars, as an operator would have them in the
inventory), runs `ansible-playbook preflight.yml -i inventories/sim` with the scenario's v0.23.0 settings and reads
the summary: `ERROR <host> <check>: <finding>. Fix: <fix>`.
"""

import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'resources'))
import kvpool_testlib as lib  # noqa: E402

V023 = yaml.safe_load((Path(__file__).resolve().parents[1] / 'vars' / 'v023.yml').read_text())


def preflight(**extra):
    run = lib.playbook('preflight.yml', extra_vars=dict(V023, **extra))
    run.text = ' '.join(run.stdout.split())  # the yaml callback's line wrapping undone
    return run


def named(run, severity, host, check, *parts):
    """The summary line of one finding, with every part in it."""
    head = '%s %s %s: ' % (severity, host, check)
    lines = run.text.split(head)[1:]
    assert lines, 'no %s line in:\n%s' % (head, run.stdout[-4000:])
    for line in lines:
        text = line.split(' ERROR ')[0].split(' WARNING ')[0]
        if all(p in text for p in parts):
            return text
    raise AssertionError('no %s line with %s in:\n%s' % (head, parts, run.stdout[-4000:]))


@pytest.fixture(autouse=True)
def healthy_nodes():
    """Every test starts and ends with the converge state: faults cleared, the pool's huge pages reserved."""
    def reset():
        lib.mockctl('fault', 'clear')
        lib.mockctl('fault', 'set', '--node', 'all', '--npu', 'all', '--check', 'hugepages', '--value', '2048')
    reset()
    yield
    reset()


def test_healthy_v023_and_v025_pass():
    # v0.25 passes with one warning per node: a preview (vllm-ascend #14757), from the check upgrade.
    for version, warnings in (('v0.23.0', 0), ('v0.25.1rc1', 2)):
        run = preflight(vllm_instance_vllm_ascend_version=version)
        assert run.rc == 0, run.stdout[-4000:]
        lib.assert_names(run.text, '2 node(s) checked', 'node1, node2', '0 error(s)', '%d warning(s)' % warnings)
    for host in ('node1', 'node2'):
        named(run, 'WARNING', host, 'upgrade', 'vllm-ascend v0.25.1rc1 is a preview', 'vllm-ascend #14757')


def test_hugepages_below_what_the_pool_needs():
    lib.mockctl('fault', 'set', '--node', 'node2', '--npu', 'all', '--check', 'hugepages', '--value', '100')
    run = preflight()
    assert run.rc != 0
    line = named(run, 'ERROR', 'node2', 'hugepages', 'HugePages_Total 100 x 2048 kB = 0.2 GiB of huge pages',
                 '4 TP rank(s) x global_segment_size 1 GiB (HCCL_INTRA_ROCE_ENABLE=1, vllm-ascend v0.23.0) '
                 'need 4.0 GiB')
    assert 'echo 2048 > /proc/sys/vm/nr_hugepages' in line
    assert 'ERROR node1 hugepages' not in run.text


def test_vendor_versions_below_the_floor_are_errors_and_unknown_are_warnings():
    lib.mockctl('fault', 'set', '--node', 'node2', '--npu', 'all', '--check', 'driver_version', '--value', '24.1.rc2')
    lib.mockctl('fault', 'set', '--node', 'node2', '--npu', 'all', '--check', 'cann_version', '--value', '8.0.RC2')
    lib.mockctl('fault', 'set', '--node', 'node1', '--npu', 'all', '--check', 'driver_version', '--value', 'missing')
    lib.mockctl('fault', 'set', '--node', 'node1', '--npu', 'all', '--check', 'cann_version', '--value', 'missing')
    run = preflight()
    assert run.rc != 0
    named(run, 'ERROR', 'node2', 'versions',
          'HDK driver 24.1.rc2 (/usr/local/Ascend/driver/version.info) is below 25.5, which vllm-ascend v0.23.0 needs')
    named(run, 'ERROR', 'node2', 'versions', 'CANN toolkit 8.0.RC2', 'is below 9.1.0, which vllm-ascend v0.23.0 needs')
    named(run, 'WARNING', 'node1', 'versions',
          'HDK driver version unknown: /usr/local/Ascend/driver/version.info not found')
    named(run, 'WARNING', 'node1', 'versions', 'CANN toolkit version unknown: ascend_toolkit_install.info under '
          '/usr/local/Ascend not found')
    assert 'ERROR node1 versions' not in run.text


def test_unknown_versions_alone_only_warn():
    lib.mockctl('fault', 'set', '--node', 'node1', '--npu', 'all', '--check', 'driver_version', '--value', 'missing')
    run = preflight()
    assert run.rc == 0, run.stdout[-3000:]
    named(run, 'WARNING', 'node1', 'versions', 'HDK driver version unknown')


def test_old_glibc_for_the_npu_wheel():
    lib.mockctl('fault', 'set', '--node', 'node1', '--npu', 'all', '--check', 'glibc', '--value', '2.31')
    run = preflight()
    assert run.rc != 0
    named(run, 'ERROR', 'node1', 'glibc', 'glibc 2.31 (ldd (GNU libc) 2.31) is older than the 2.35 the '
          'mooncake-transfer-engine-npu wheel of vllm-ascend v0.23.0 needs')
    assert 'node2 glibc' not in run.text


@pytest.mark.parametrize('extra, host, part', [
    ({'vllm_instance_kv_transfer_extra': {'kv_port': '20002'}}, 'node2', 'kv_port of instance vllm-8002 20002'),
    ({'vllm_instance_instances': [{'devices': [0, 1, 2, 3], 'port': 20080}]}, 'node1',
     'port of instance vllm-20080 20080'),
    ({'mooncake_master_port': 20088}, 'node1', 'Mooncake master RPC port (mooncake_master_port) 20088'),
    ({'mooncake_master_metrics_port': 20003}, 'node1',
     'Mooncake master metrics port (mooncake_master_metrics_port) 20003'),
    ({'preflight_extra_ports': {20010: 'router port'}}, 'node2', 'router port 20010'),
])
def test_ports_inside_the_adxl_listen_range(extra, host, part):
    run = preflight(**extra)
    assert run.rc != 0
    line = named(run, 'ERROR', host, 'adxl_ports', part, 'inside the ADXL listen range [20000, 20100]',
                 'vllm-ascend #8938')
    assert 'ASCEND_BASE_PORT' in line


def test_ascend_base_port_moves_the_adxl_range():
    run = preflight(vllm_instance_kv_transfer_extra={'kv_port': '20002'},
                    vllm_instance_environment={'ASCEND_BASE_PORT': '22000'})
    assert run.rc == 0, run.stdout[-3000:]


def test_hccl_intra_roce_missing_on_a2():
    # Declared A3 on the mock's 910B3 NPUs (what npu-smi reports): no HCCL_INTRA_ROCE_ENABLE is rendered.
    run = preflight(vllm_instance_npu_type='a3')
    assert run.rc != 0
    named(run, 'ERROR', 'node1', 'hccl_roce', 'instance vllm-8002 runs on A2 NPUs (910B3) with protocol ascend and '
          'vllm-ascend v0.23.0, but HCCL_INTRA_ROCE_ENABLE is unset', 'kv_pool.md')
    run = preflight(vllm_instance_environment={'HCCL_INTRA_ROCE_ENABLE': '0'})
    named(run, 'ERROR', 'node2', 'hccl_roce', "HCCL_INTRA_ROCE_ENABLE is '0'")


def test_transfer_timeout_and_lease():
    run = preflight(vllm_instance_environment={'ASCEND_TRANSFER_TIMEOUT': '3000', 'HCCL_RDMA_TIMEOUT': '17',
                                               'HCCL_RDMA_RETRY_CNT': '7'})
    assert run.rc != 0
    named(run, 'ERROR', 'node1', 'timeouts', 'ASCEND_TRANSFER_TIMEOUT 3000 ms is below the RDMA retry budget',
          '= 3758 ms')
    run = preflight(vllm_instance_environment={'ASCEND_TRANSFER_TIMEOUT': '12000'})
    named(run, 'ERROR', 'node2', 'timeouts', "default_kv_lease_ttl 10000 ms (the default of Mooncake 0.3.13.post1) is "
          'not above ASCEND_TRANSFER_TIMEOUT 12000 ms', 'LEASE_EXPIRED, -707')
    run = preflight(vllm_instance_environment={'ASCEND_TRANSFER_TIMEOUT': '12000'},
                    mooncake_master_default_kv_lease_ttl=15000)
    assert run.rc == 0, run.stdout[-3000:]


def test_client_ttl_with_ssd_offload():
    run = preflight(mooncake_config_extra={'enable_ssd_offload': True, 'ssd_offload_path': '/nvme/mooncake'})
    assert run.rc == 0  # a warning: what the docs recommend
    named(run, 'WARNING', 'node1', 'client_ttl', "client_ttl is 10 s (default), below the 120 s vllm-ascend recommends")
    run = preflight(mooncake_config_extra={'enable_ssd_offload': True}, mooncake_master_client_ttl=120)
    assert 'client_ttl' not in run.text.rsplit('pre-flight: 2 node(s)', maxsplit=1)[-1]


def test_mooncake_below_the_release_floor():
    run = preflight(mooncake_master_mooncake_version='0.3.9')
    assert run.rc != 0
    named(run, 'ERROR', 'node1', 'versions', 'Mooncake 0.3.9 (mooncake_master_mooncake_version) is below 0.3.11.post1')


def test_v022_guide_settings_pass_without_the_new_requirements():
    lib.mockctl('fault', 'set', '--node', 'all', '--npu', 'all', '--check', 'hugepages', '--value', '0')
    lib.mockctl('fault', 'set', '--node', 'all', '--npu', 'all', '--check', 'glibc', '--value', '2.31')
    run = preflight(vllm_instance_vllm_ascend_version='v0.22.1rc1', mooncake_master_mooncake_version='0.3.9')
    assert run.rc == 0, run.stdout[-3000:]
