"""Tests of ringleader.runtime, the helper training code imports."""
