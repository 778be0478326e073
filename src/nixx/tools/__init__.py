"""Server-side tools offered to the model: workspace files and the transcript.

`ToolRegistry(settings, store)` is the entry point (see docs/tools.md).
"""

from __future__ import annotations

from nixx.tools.files import confine
from nixx.tools.registry import ToolRegistry

__all__ = ["ToolRegistry", "confine"]
