"""The Ray executor: tests pinned to cluster nodes through per-node agent actors.

Arrows run one way: ``executor`` -> ``runner``/``reserve`` -> ``session``; ``agent`` is the code
each node runs and imports nothing of fabriccheck's executors.
"""
