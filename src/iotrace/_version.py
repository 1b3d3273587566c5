"""The version of iotrace, written here only: the package's metadata is made from this line
(pyproject.toml, scikit-build-core's regex provider) and every command reads it back."""

__version__ = "0.3.0"
