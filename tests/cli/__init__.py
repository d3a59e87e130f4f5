"""The rotifer command line, through real subprocesses of the console script."""
