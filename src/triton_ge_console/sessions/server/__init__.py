"""The server process: launching pieces, the registry, supervision, the server log, access."""
