"""The base of the fault-injecting broken kernels: the oracle, except that ``verify`` (and with it
``verify_into``) calls ``fault()`` on every batch with ``V > 40`` and at least 2 requests.

Not itself a catalogue entry. Subclasses name the fault: a signal, a hard exit, a hang, a CUDA fault.
On smaller batches they are exactly ``harness.adapters.reference_kernel`` (randomness exposed through
``random_draws``, so every layer judges them), so a harness that survives the fault shrinks the
failing case to ``V = 41`` with 2 requests.
"""

from harness.adapters.reference_kernel import ReferenceKernel
from harness.contract import VerifyBatch, VerifyOutput

MIN_FAULT_VOCAB = 41
MIN_FAULT_REQUESTS = 2


def faults_on(batch: VerifyBatch) -> bool:
    return batch.vocab_size >= MIN_FAULT_VOCAB and batch.num_reqs >= MIN_FAULT_REQUESTS


class FaultsOnLargeBatches(ReferenceKernel):
    name = "broken.faulting"

    def fault(self, batch: VerifyBatch) -> None:
        raise NotImplementedError

    def verify(self, batch: VerifyBatch) -> VerifyOutput:
        if faults_on(batch):
            self.fault(batch)
        return super().verify(batch)
