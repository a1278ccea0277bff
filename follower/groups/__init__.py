"""Group mail both ways (sending and taking control messages) and the loop guard."""
