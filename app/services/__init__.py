"""Use cases: load -> validate/compute -> persist. Services own the transaction."""
