"""The streaming matcher's pure parts: a routing snapshot, post encoding, routing, matching."""
