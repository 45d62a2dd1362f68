"""Reports: HTML/JSON/CSV renderers of a run."""
