"""Load shedding: what to shed (spread caps by utility), how much (the buffer controller)."""
