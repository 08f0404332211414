"""vam_cli: the `vam-stack` command (vam_cli.main), the one package that may import every other."""
