"""Re-tokenization of the final prompt and repair to a fixed point (``fixed_point``)."""
