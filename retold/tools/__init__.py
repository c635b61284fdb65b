"""The five memory tools of spec §11: JSON Schemas per principal and handlers that never raise."""

from retold.tools.handlers import ERROR_CODES, MemoryTools, ToolError
from retold.tools.schemas import TOOL_NAMES

__all__ = ["ERROR_CODES", "TOOL_NAMES", "MemoryTools", "ToolError"]
