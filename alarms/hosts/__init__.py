"""One folder per agent host talk has a door into, each meeting the door contract (`alarms.door`)
and listed once in `alarms.registry`: its doors, its install and uninstall, its status, and its
plugin or extension files. Adding a host is a new folder here and one line in the registry."""
