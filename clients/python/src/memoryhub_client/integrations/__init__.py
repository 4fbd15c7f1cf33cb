"""Framework adapters over the client: each needs its framework installed (the client's
optional extras)."""
