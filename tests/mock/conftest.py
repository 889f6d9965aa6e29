"""pytest set-up for the mock Atlas test equipment (tests/mock): SIMULATED nodes, not the collection."""


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "docker: needs a docker engine; starts and removes the SIMULATED mock cluster (deselect: -m 'not docker')",
    )
