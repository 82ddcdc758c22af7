"""Console screens: dashboard, repository, logs, start, and the modal dialogs."""
