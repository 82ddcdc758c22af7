"""Dashboard widgets: each holds reactive state and redraws itself in its watcher."""
