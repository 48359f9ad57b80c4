"""Routing health on live posts: per-batch figures against hash routing, and a mergeable,
memory-bounded sketch of word frequencies that finds hot words without storing the stream."""
