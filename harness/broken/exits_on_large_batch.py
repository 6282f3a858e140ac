"""Invented (a hard exit: a library that calls ``exit()`` on an error it cannot report): ``verify``
calls ``os._exit(3)`` when ``V > 40`` and there are at least 2 requests. Correct otherwise.
Expected catcher: ``structural`` (a ``crash`` finding with exit status 3; the harness exits 1)."""

import os

from harness.broken.faulting import FaultsOnLargeBatches


class ExitsOnLargeBatch(FaultsOnLargeBatches):
    name = "broken.exits_on_large_batch"

    def fault(self, batch):
        os._exit(3)


kernel = ExitsOnLargeBatch()
