"""Tests of orgate.protocol and of the spec helpers in tests.support."""
