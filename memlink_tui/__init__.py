"""memlink's terminal app and command line: clients of the engine."""
