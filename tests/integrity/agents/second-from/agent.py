"""Hole 7 of issue 13: an agent whose image must never be built (it changes nothing)."""

print("second-from: this agent's image was built")
