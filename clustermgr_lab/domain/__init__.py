"""Pure domain: Worker Specs, limits, adaptive policy, options, templates and records, with no I/O loop (doctested)."""
