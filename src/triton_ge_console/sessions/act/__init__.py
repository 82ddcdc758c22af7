"""Acting on a server: control (load, unload, reload), watching a spec, a test request."""
