"""The ``phaseaware`` command line: one module per command."""
