"""The `talk` command: wiring between the user and the library packages."""
