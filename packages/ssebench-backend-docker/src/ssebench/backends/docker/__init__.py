"""The Docker backend: image builders and (with its issue) DockerBackend."""
