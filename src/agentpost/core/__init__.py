"""Pure logic with no I/O: ids, canonical JSON, errors, clocks (DESIGN.md §1)."""
