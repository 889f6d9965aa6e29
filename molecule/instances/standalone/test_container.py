"""The container phase for real: site.yml on THIS machine with a real docker engine (not only check mode).

The guide's `docker run` becomes community.docker.docker_container: the container is started from the mock node
image (kvpool-mock-node:latest) with stand-in device nodes (char devices made with mknod under a temporary root,
passed in as /dev/davinci0-3, davinci_manager, devmm_svm, hisi_hdc) and stand-in host files for every mount of the
guide, /etc/hccn.conf included. The master, the pool probe and one instance (the vllm stand-in of tests/mock)
then run inside it through the modules' container mode, exactly as on an Atlas node. Ports on this machine's host
network are moved away from the defaults (vars/container.yml).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'tests'))
import instances_lib as lib  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'resources'))
import kvpool_testlib as testlib  # noqa: E402

CONTAINER = 'kvpool-ctest-vllm-ascend'
MASTER_C = 'kvpool-mooncake-master'
INSTANCE_C = 'kvpool-vllm-vllm-18002'
IMAGE_B = 'kvpool-ctest-image:b'
ENDPOINT = 'http://127.0.0.1:18002'
DEVICES = ['davinci0', 'davinci1', 'davinci2', 'davinci3', 'davinci_manager', 'devmm_svm', 'hisi_hdc']
GUIDE_TARGETS = ['/usr/local/dcmi', '/usr/local/Ascend/driver/tools/hccn_tool', '/usr/local/bin/npu-smi',
                 '/usr/local/Ascend/driver/lib64/', '/usr/local/Ascend/driver/version.info',
                 '/etc/ascend_install.info', '/etc/hccn.conf', '/root/.cache']

pytestmark = pytest.mark.skipif(shutil.which('docker') is None, reason='needs a docker engine')


def inspect(name=CONTAINER):
    proc = subprocess.run(['docker', 'inspect', name], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          universal_newlines=True, check=False)
    return json.loads(proc.stdout)[0] if proc.returncode == 0 else None


def make_tree(root):
    """The stand-in host: device nodes, the guide's mounted files, a model directory, an inventory of localhost."""
    root = Path(root)
    (root / 'dev').mkdir(parents=True)
    for name in DEVICES:
        # Stand-in device nodes: the char device of /dev/null (1, 3) under the NPU devices' names.
        os.mknod(str(root / 'dev' / name), 0o600 | 0o020000, os.makedev(1, 3))
    host = root / 'host'
    for d in ['usr/local/dcmi', 'usr/local/Ascend/driver/lib64', 'root/.cache', 'usr/local/Ascend/driver/tools',
              'usr/local/bin', 'etc']:
        (host / d).mkdir(parents=True, exist_ok=True)
    (host / 'usr/local/Ascend/driver/tools/hccn_tool').write_text('#!/bin/sh\necho SIMULATED stand-in\n')
    (host / 'usr/local/bin/npu-smi').write_text('#!/bin/sh\necho SIMULATED stand-in\n')
    (host / 'usr/local/Ascend/driver/version.info').write_text('Version=24.1.rc3 (SIMULATED stand-in)\n')
    (host / 'etc/ascend_install.info').write_text('Driver_Install_Path_Param=/usr/local/Ascend\n')
    (host / 'etc/hccn.conf').write_text('address_0=29.1.1.80\nnetmask_0=255.255.255.0\n')
    # The guide's model directory under /root/.cache (the stand-in, like vLLM, needs its config.json).
    model = host / 'root/.cache/Qwen2.5-72B-Instruct'
    model.mkdir()
    (model / 'config.json').write_text('{"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"]}\n')
    inventory = root / 'hosts.yml'
    inventory.write_text(
        'all:\n  children:\n    npu_nodes:\n      hosts:\n        localhost:\n'
        '          ansible_connection: local\n          ansible_python_interpreter: %s\n'
        '    mooncake_master:\n      hosts:\n        localhost:\n' % lib.sys.executable)
    return inventory


@pytest.fixture(scope='module')
def ctest():
    root = Path(tempfile.mkdtemp(prefix='kvpool-ctest-'))
    inventory = make_tree(root)
    subprocess.run(['docker', 'rm', '-f', CONTAINER], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=False)
    ctx = {'root': root, 'inventory': inventory,
           'vars': {'kvpool_ctest_root': str(root), 'kvpool_ctest_repo': str(lib.REPO)}}
    yield ctx
    run(ctx, 'teardown.yml', kvpool_teardown_confirm=True)
    subprocess.run(['docker', 'rm', '-f', CONTAINER], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=False)
    subprocess.run(['docker', 'rmi', IMAGE_B], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    shutil.rmtree(str(root), ignore_errors=True)


def run(ctx, name='site.yml', *args, check=False, **extra):
    ev = dict(ctx['vars'])
    ev.update(extra)
    return lib.playbook(name, *args, extra_vars=ev, check=check, inventory=ctx['inventory'],
                        var_files=[lib.SCENARIO / 'vars' / 'container.yml'])


@pytest.fixture(scope='module')
def deployed(ctest):
    return run(ctest)


def test_site_from_nothing_runs_everything_in_the_container(deployed, ctest):
    assert deployed.rc == 0, deployed.stdout[-6000:]
    info = inspect()
    assert info and info['State']['Running']
    assert info['HostConfig']['NetworkMode'] == 'host'
    assert info['HostConfig']['ShmSize'] == 1024 ** 3
    devices = dict((d['PathInContainer'], d['PathOnHost']) for d in info['HostConfig']['Devices'])
    assert devices == dict(('/dev/' + n, '%s/dev/%s' % (ctest['root'], n)) for n in DEVICES)
    targets = [m['Destination'].rstrip('/') for m in info['Mounts']]
    for target in GUIDE_TARGETS:
        assert target.rstrip('/') in targets, targets
    assert lib.sh(CONTAINER, 'cat /etc/hccn.conf')[1].startswith('address_0=29.1.1.80')
    # Master and instance each run in a container of their own, from the guide container's image, with its mounts
    # (hccn.conf included), on the host network, with a restart policy; the instance gets only its own NPUs.
    for name, argv_part, npus in ((MASTER_C, '--rpc_port=15088', []), (INSTANCE_C, 'serve', [0, 1, 2, 3])):
        svc = inspect(name)
        assert svc and svc['State']['Running'], name
        assert svc['HostConfig']['NetworkMode'] == 'host'
        assert svc['HostConfig']['RestartPolicy'] == {'Name': 'on-failure', 'MaximumRetryCount': 5}
        assert svc['Config']['Image'] == info['Config']['Image']
        assert argv_part in ' '.join([svc['Path']] + svc['Args'])
        svc_targets = [m['Destination'].rstrip('/') for m in svc['Mounts']]
        assert all(t.rstrip('/') in svc_targets for t in GUIDE_TARGETS), svc_targets
        svc_devices = sorted(d['PathInContainer'] for d in svc['HostConfig']['Devices'] or [])
        assert svc_devices == sorted(['/dev/davinci%d' % n for n in npus]
                                     + ['/dev/davinci_manager', '/dev/devmm_svm', '/dev/hisi_hdc'])
    assert lib.models(ENDPOINT) == ['qwen']
    status = deployed.status('localhost', 'vllm-18002')
    assert status['health'] == 'healthy' and status['endpoint'] == ENDPOINT
    assert 'vLLM instances' in deployed.stdout and 'healthy' in deployed.stdout


def test_second_run_changes_nothing(deployed, ctest):
    again = run(ctest)
    assert again.rc == 0 and again.changed() == {'localhost': 0}, again.changed_tasks() or again.stdout[-4000:]


def test_check_mode_is_clean(deployed, ctest):
    checked = run(ctest, check=True)
    assert checked.rc == 0 and checked.changed() == {'localhost': 0}, checked.changed_tasks() or checked.stdout[-4000:]
    assert checked.status('localhost', 'vllm-18002')['health'] == 'healthy'


def test_killed_services_come_back_by_themselves_and_a_rerun_changes_nothing(deployed, ctest):
    """Drill (a) in container mode: kill -9 of the master's and the instance's main process (from this machine);
    docker's restart policy brings each back, healthy within 15 s, and the next site.yml changes nothing."""
    for name, healthy in ((MASTER_C, lambda: lib.http('http://127.0.0.1:19003/health')[0] == 200),
                          (INSTANCE_C, lambda: lib.models(ENDPOINT) == ['qwen'])):
        pid = inspect(name)['State']['Pid']
        killed = time.monotonic()
        os.kill(pid, 9)
        back = None
        while time.monotonic() - killed < 30:
            now = inspect(name)
            if now and now['State']['Running'] and now['State']['Pid'] != pid and healthy():
                back = time.monotonic() - killed
                break
            time.sleep(0.2)
        print('drill a (container %s): kill -9 of pid %d -> healthy again after %s s without Ansible (bound 15 s)'
              % (name, pid, '%.1f' % back if back is not None else 'more than 30'))
        assert back is not None and back < 15
    again = run(ctest)
    assert again.rc == 0 and again.changed() == {'localhost': 0}, again.changed_tasks() or again.stdout[-4000:]


def test_a_crash_loop_stops_after_the_restart_limit_and_names_the_container(deployed, ctest):
    """Drill (c) in container mode: an instance whose flag makes it exit at start is restarted by docker up to its
    retry limit, then the run names the container and shows the tail of docker logs."""
    res = run(ctest, 'site.yml', '--tags', 'instances', vllm_instance_kv_connector='NoSuchConnector')
    assert res.rc != 0
    status = res.status('localhost', 'vllm-18002')
    assert status and status['failed'] and 'container %s' % INSTANCE_C in status['error'], res.stdout[-6000:]
    assert 'Last lines of `docker logs %s' % INSTANCE_C in status['error']
    assert 'Unsupported connector type: NoSuchConnector' in status['error']
    svc = inspect(INSTANCE_C)
    print('drill c (container): %s, %d restart(s), exit code %s'
          % (svc['State']['Status'], svc['RestartCount'], svc['State']['ExitCode']))
    assert svc['State']['Status'] == 'exited' and svc['RestartCount'] == 5
    healed = run(ctest)
    assert healed.rc == 0 and lib.models(ENDPOINT) == ['qwen'], healed.stdout[-4000:]


def test_changing_the_image_recreates_the_container_and_the_daemons_come_back(deployed, ctest):
    build = subprocess.run(['docker', 'build', '-q', '-t', IMAGE_B, '-'], input='FROM kvpool-mock-node:latest\n'
                           'LABEL kvpool.ctest="image b"\n', universal_newlines=True, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, check=False)
    assert build.returncode == 0, build.stdout
    before = inspect()['Id']
    checked = run(ctest, check=True, vllm_ascend_container_image=IMAGE_B)
    assert checked.rc == 0 and checked.changed()['localhost'] >= 1 and inspect()['Id'] == before
    res = run(ctest, vllm_ascend_container_image=IMAGE_B)
    assert res.rc == 0, res.stdout[-6000:]
    info = inspect()
    assert info['Id'] != before and info['Config']['Image'] == IMAGE_B
    assert lib.models(ENDPOINT) == ['qwen']
    assert res.status('localhost', 'vllm-18002')['action'] == 'restarted'
    assert inspect(INSTANCE_C)['Config']['Image'] == IMAGE_B
    assert run(ctest, vllm_ascend_container_image=IMAGE_B).changed() == {'localhost': 0}


def test_missing_mount_source_fails_before_anything_changes(deployed, ctest):
    hccn = ctest['root'] / 'host' / 'etc' / 'hccn.conf'
    hccn.rename(hccn.with_suffix('.away'))
    try:
        res = run(ctest, vllm_ascend_container_image=IMAGE_B)
    finally:
        hccn.with_suffix('.away').rename(hccn)
    assert res.rc != 0 and res.changed() == {'localhost': 0}
    testlib.assert_names(res.stdout, 'localhost: missing', 'on the host', '/etc/hccn.conf')


def test_teardown_removes_the_container_and_the_files(deployed, ctest):
    res = run(ctest, 'teardown.yml', kvpool_teardown_confirm=True)
    assert res.rc == 0, res.stdout[-4000:]
    assert inspect() is None and inspect(MASTER_C) is None and inspect(INSTANCE_C) is None
    assert not (ctest['root'] / 'etc-ascend-kvpool').exists()
    assert not (ctest['root'] / 'var-lib-ascend-kvpool').exists()
    assert lib.models(ENDPOINT) is None
