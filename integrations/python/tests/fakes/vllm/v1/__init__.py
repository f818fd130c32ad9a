"""Test double shaped like the real package; see engine.py."""
