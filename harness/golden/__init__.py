"""The pre-merge differential (``python -m harness record`` / ``diff``): ``case_set`` (the deterministic
cases of a golden file), ``file_format`` (recording and reading the file), ``judge`` (oracle verdicts on
changed answers), ``diff`` (replay a file on the kernel as it is now), ``mutant_sweep`` (diff against
every catalogue mutant), ``commands`` (the two CLI subcommands)."""
