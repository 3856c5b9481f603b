"""The pure core: state, rules and the result, without I/O (docs/design.md)."""
