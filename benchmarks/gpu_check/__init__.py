"""gpu_check: every GPU check of the suite in three commands (run.py; README.md beside it)."""
