"""Test helpers shared by the whole suite (spec validation, SSE grammar checks)."""
