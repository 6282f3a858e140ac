"""Proof that the harness catches bugs: ``catalogue`` (source-level mutants of ``kernels/``) and
``mutate`` (applies each to a temporary copy of ``kernels/`` and runs the properties expected to kill
it)."""
