"""Fixtures shared by the site.yml tests of the instances scenario (the SIMULATED two-node cluster)."""

import pytest

import instances_lib as lib


def site(*args, **kw):
    return lib.playbook('site.yml', *args, **kw)


@pytest.fixture(scope='module')
def deployed():
    """site.yml from whatever the previous module left: the default deployment, healthy."""
    run = site()
    assert run.rc == 0, run.stdout[-6000:]
    return run


@pytest.fixture
def heal():
    """Bring the cluster back to the default deployment after a test that changed it."""
    yield
    run = site()
    assert run.rc == 0, run.stdout[-6000:]
