"""The Textual console: dashboard, screens and widgets."""
