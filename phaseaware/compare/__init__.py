"""``phaseaware compare``: naive vs phase-aware assembly on the user's own questions.

``questions`` (the JSONL input), ``arrange`` (the arrangements and the controls
order-only and placebo, each assembled by the public :func:`phaseaware.assemble` at
one token budget), ``placebo`` (the profile turned half a period), ``mismatch`` (the
profile's model, tokenizer and chat format against the run's), ``grade`` (exact,
contains, regex or ``module:function``), ``log`` (the resumable, fsynced answer
log), ``run`` (questions x arrangements through a calibration backend), ``report``
(accuracy beside the profile's prediction, paired McNemar tests, evidence residues,
tokens) and ``verdict`` (the gain, the order, phase placement: from the paired tests).
"""
