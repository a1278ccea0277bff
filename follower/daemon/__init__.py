"""The follower process: the daemon loop, its upkeep, and its state on disk."""
