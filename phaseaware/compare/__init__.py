"""``phaseaware compare``: naive vs phase-aware assembly on the user's own questions.

``questions`` (the JSONL input), ``arrange`` (the arrangements, each assembled by
the public :func:`phaseaware.assemble` at one token budget), ``grade`` (exact,
contains, regex or ``module:function``), ``log`` (the resumable, fsynced answer
log), ``run`` (questions x arrangements through a calibration backend) and
``report`` (accuracy, paired McNemar tests, evidence residues, tokens, verdict).
"""
