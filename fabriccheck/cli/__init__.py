"""The command line: typer commands; the only place that prints and maps errors to exit codes."""
