"""The control surface: fault rules, capacity knobs, the call journal and metrics."""
