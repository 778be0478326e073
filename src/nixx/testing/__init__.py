"""Test support shipped with nixx: the scripted OpenAI-compatible backend."""
