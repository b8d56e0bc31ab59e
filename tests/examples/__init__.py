"""Tests of the bundled examples, run as real multi-process jobs."""
