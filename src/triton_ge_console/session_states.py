"""A session's states as ge-console records and shows them (`ls`, `status`, the console, the fleet): a leaf,
so value types and views name them without importing the registry that decides them."""

from __future__ import annotations

# Recorded states; "dead" is never written: a starting/ready session whose process is gone reads so.
STARTING, READY, DEAD, STOPPED = "starting", "ready", "dead", "stopped"
# a running server that sent no reply within the asker's timeout (hung, or stopped by SIGSTOP): never "ready"
NOT_ANSWERING = "not answering"
SESSION_STATES = (STARTING, READY, DEAD, STOPPED)
