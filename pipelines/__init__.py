"""Built-in import rules, one module each; loaded by name, never imported by `toolkit`."""
