"""End-to-end tests of the structured-output safety net over HTTP, and of ``orgate eval``."""
