"""Model backends for calibration: one small interface, one module per backend."""
