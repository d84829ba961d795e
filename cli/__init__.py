"""The `tunefuse` command line (Typer): one module per command group."""
