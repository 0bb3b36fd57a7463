"""The Kubernetes backend (arriving with its issue)."""
