"""The fabric simulator: a digital twin that prints what the real tools would print."""
