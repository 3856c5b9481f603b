"""roundtabled: multi-agent roundtable debates for OpenCode, run by a daemon beside OpenCode.

The daemon drives OpenCode agents through the server's HTTP API in round-robin turns inside a
child session (S2), lets an observer consolidate the debate, and delivers the result to the
session that asked for it (S1). See README.md ("Design") for the architecture.
"""

__version__ = "0.1.0"
