"""`ge-console doctor`: the pre-flight of a new host (CANN, driver, NPUs, pyACL, ATC, Triton, limits)."""
