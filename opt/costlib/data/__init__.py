"""Bundled data: hardware catalog and model cards (JSON, every entry with its source)."""
