"""Several servers at once: the fleet's status, Kubernetes manifests and discovery (no UI toolkit here)."""
