"""Invented (a hang: a deadlocked program, a spin on a flag nobody sets): ``verify`` sleeps forever
when ``V > 40`` and there are at least 2 requests. Correct otherwise. Expected catcher:
``structural`` (a ``hang`` finding once the call outlives its time limit)."""

import threading

from harness.broken.faulting import FaultsOnLargeBatches


class HangsOnLargeBatch(FaultsOnLargeBatches):
    name = "broken.hangs_on_large_batch"

    def fault(self, batch):
        threading.Event().wait()  # never set


kernel = HangsOnLargeBatch()
