"""The command line: ``trainbench <command>``; one module per command, all logic in the library."""
