"""Model repositories: deployment spec, config.pbtxt, validation, build and ATC conversion."""
