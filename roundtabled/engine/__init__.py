"""The engine: one roundtable's worker and the shell that executes the core's commands."""
