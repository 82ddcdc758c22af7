"""The deployment spec: YAML with positions read into typed values, every problem at once."""
