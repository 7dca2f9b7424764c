"""pytest plugin that runs llama-server's suite, unchanged, on fixtures.

Loaded with `-p upstream_suite_plugin` by scripts/upstream-suite.sh:
- the suite's session fixture starts every preset once to download its
  model (ServerPreset.load_all); here nothing is downloaded (the launcher
  maps each preset to a generated fixture), so that is skipped;
- each test's call gets a deadline (UPSTREAM_SUITE_TEST_TIMEOUT seconds,
  default 60): past it the test fails with Timeout, and the suite's own
  teardown stops its servers.
"""

import os
import signal
import sys

import pytest


class Timeout(Exception):
    pass


def _on_alarm(signum, frame):
    raise Timeout(f"the test ran past UPSTREAM_SUITE_TEST_TIMEOUT ({os.environ.get('UPSTREAM_SUITE_TEST_TIMEOUT', '60')} s)")


def pytest_sessionstart(session):
    tests_dir = os.environ.get("UPSTREAM_SUITE_TESTS")
    if tests_dir and tests_dir not in sys.path:
        sys.path.insert(0, tests_dir)
    import utils  # the suite's own module, the one its conftest imported

    utils.ServerPreset.load_all = staticmethod(lambda: None)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    seconds = int(os.environ.get("UPSTREAM_SUITE_TEST_TIMEOUT", "60"))
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
