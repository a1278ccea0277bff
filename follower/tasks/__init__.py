"""The opencode-mesh task protocol (`mesh`) and the ledger of tasks sent and received (`ledger`)."""
