"""Bundled benchmark instances (package data) with provenance and known optima."""
