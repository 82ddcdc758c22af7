"""Sessions: Triton server processes, control, metrics, telemetry and the session registry (no UI code)."""
