"""The compiled LangGraph graphs and drop-in nodes (ARCHITECTURE §6). Imported lazily."""
