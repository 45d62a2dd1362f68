"""Bundled data files (topologies, test specs): symlinks into the repo, real copies in a wheel."""
