"""Invented (a crash: an illegal read in native code, as an out-of-bounds pointer in a host launcher
or a C++ extension does): ``verify`` reads address 0 through ``ctypes`` when ``V > 40`` and there
are at least 2 requests, and the process dies of SIGSEGV. Correct otherwise. Expected catcher:
``structural`` (a ``crash`` finding, in a supervised worker)."""

import ctypes

from harness.broken.faulting import FaultsOnLargeBatches


class SegfaultOnLargeBatch(FaultsOnLargeBatches):
    name = "broken.segfault_on_large_batch"

    def fault(self, batch):
        ctypes.string_at(0)


kernel = SegfaultOnLargeBatch()
