"""The package version, kept in one place and read without importing anything heavy."""

__version__ = "0.1.0"
