"""Fake upstream servers speaking real provider protocols, over loopback."""
