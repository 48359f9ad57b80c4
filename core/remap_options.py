"""The remap's options that the learn job, the publish gate, the command line and the remap
DAG share, each declared once. Plain constants, no numpy: a DAG file reads them while it is
parsed (``tests/test_layers.py``)."""

from __future__ import annotations

from typing import Final, Literal, get_args

# the learners: the platform's (hash, salb, salb2) and the METIS-based baselines
Algorithm = Literal["hash", "salb", "salb2", "gC", "gFC", "gFCL", "gNFCL"]
ALGORITHMS: tuple[str, ...] = get_args(Algorithm)
WORDNET_VARIANTS: tuple[str, ...] = ALGORITHMS[3:]
DEFAULT_ALGORITHM: Final = "salb2"
# hot words get versions on several matchers (paper Sect. 5.1; salb2 needs it)
DEFAULT_SPLIT = True
# an incremental remap re-places at most this share of the active subscriptions
DEFAULT_MAX_MOVED = 0.1
# an incremental remap stands unless learning from scratch beats its throughput on posts
# neither learned from by more than this
DEFAULT_FULL_REMAP_GAIN = 0.1
# the gate: a candidate publishes when it beats the routing in force by this much
DEFAULT_MARGIN = 0.02
# the platform's hold-out: the share of posts learning leaves out and evaluation judges
# on, and the seed that picks them (both sides pick the same posts: core.sampling)
HOLDOUT_FRACTION = 0.2
HOLDOUT_SEED = 7
