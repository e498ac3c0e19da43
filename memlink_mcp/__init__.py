"""memlink over the Model Context Protocol: a third client of the engine (after the app
and the CLI), so any agent or editor can search, recall and write the same memory.
Never imports textual (a test keeps it so)."""
