"""Executors: run tests on hosts (sim, ssh, ray) and return raw text."""
