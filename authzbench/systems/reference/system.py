"""The oracle served as a backend: the ground truth in process, for the harness tests (no server)."""

from authzbench.systems.contract import BOTH, System

SYSTEM = System(
    name="reference", adapter="authzbench.systems.reference.adapter:ReferenceBackend",
    native="authzbench.systems.reference.native", default=False, models=BOTH, in_process=True, colour=10,
    order=0,
)
