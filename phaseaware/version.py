"""The package version, in one place (the facade and the calibration provenance read it)."""

__all__ = ["__version__"]

__version__ = "0.1.0"
