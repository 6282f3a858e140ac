"""Long runs and their memory: ``fuzz`` (time-budgeted, sharded campaigns), ``merge`` (shard reports
into one), ``corpus`` (the regression corpus in tests/regressions and its replay), ``calibrate``
(false-alarm calibration of the statistical layer on correct kernels).
"""
