"""The load generator behind `ge-console bench`, the console's load panel and the notebooks."""
