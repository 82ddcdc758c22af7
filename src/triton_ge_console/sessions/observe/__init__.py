"""Observing a server: polling its sources into immutable snapshots, history, health, telemetry."""
