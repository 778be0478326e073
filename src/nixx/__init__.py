"""nixx: a local-first AI workspace.

Nothing happens at import time: every component is built from explicit settings
(`nixx.config.load_settings()`), e.g. `nixx.store.open_store(settings)`.
"""

__version__ = "0.1.0"
