"""Pure logic with no I/O: ids, canonical JSON, errors, clocks (README.md)."""
