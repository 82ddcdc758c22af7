"""ipywidgets views over session snapshots, for Jupyter notebooks."""
