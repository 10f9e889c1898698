"""Human-readable output: terminal tables and plots."""
