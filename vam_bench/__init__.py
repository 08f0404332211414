"""vam_bench: every benchmark (`vam-stack bench NAME`), each printing numbers and writing
`--json PATH` (`-` for stdout) the same way; speed targets live here, never in unit tests."""
