"""Fixtures every backend's own test file shares: the file names its backend once (`pytestmark =
pytest.mark.backend(NAME)`) and, if its write tests need a private copy of the data, where that copy
lives (`SCRATCH_ENDPOINT`, e.g. {"database": "authzbench_scratch"}). A new backend's test file then holds
only its own cases.

- `session`: the running, loaded deployment (started once per pytest session, tests/conftest.py);
  skipped when the backend does not implement the run's model.
- `backend`: a connected adapter on the shared data (timeout_s=10). A file may list option variants in
  `BACKEND_VARIANTS` (e.g. [{"query": "expanded"}, {"query": "acl"}]): every test using `backend` runs once
  per variant.
- `scratch`: a connected adapter on a private copy of the dataset (dropped, schema created, loaded,
  built - `scratch.first_build` is what build() returned - and marked loaded), dropped at the end, so
  write tests leave the shared data intact. Options: `SCRATCH_OPTIONS` (default timeout_s=10).
"""

from __future__ import annotations

import pytest

from authzbench.backends.registry import backend_class
from authzbench.run.loading import run_build, run_load


def _backend_of(request) -> str:
    mark = request.node.get_closest_marker("backend")
    if mark is None:
        raise pytest.UsageError(f"{request.module.__name__}: set pytestmark = pytest.mark.backend(NAME)")
    return mark.args[0]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    variants = getattr(metafunc.module, "BACKEND_VARIANTS", None)
    if variants and "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", variants, indirect=True, scope="module",
                             ids=["-".join(f"{k}={v}" for k, v in v.items()) for v in variants])


@pytest.fixture(scope="module")
def session(request, deployments, dataset, run_store):
    return deployments.get(_backend_of(request), dataset, run_store)


@pytest.fixture(scope="module")
def backend(request, session):
    with session.backend(timeout_s=10, **getattr(request, "param", {})) as b:
        yield b


@pytest.fixture(scope="module")
def scratch(request, session, dataset):
    extra = getattr(request.module, "SCRATCH_ENDPOINT", None)
    if extra is None:
        raise pytest.UsageError(
            f"{request.module.__name__}: `scratch` needs SCRATCH_ENDPOINT (where the copy lives)")
    options = getattr(request.module, "SCRATCH_OPTIONS", {"timeout_s": 10})
    with backend_class(_backend_of(request))({**session.dep.endpoint, **extra}, options) as b:
        b.drop()
        b.create_schema()
        run_load(b, dataset)
        b.first_build = run_build(b)
        b.mark_loaded(dataset.hash)
        yield b
        b.drop()
