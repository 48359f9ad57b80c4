"""The stream's posts/s on C cores, projected from one machine's measured batch times, with
the busiest matcher in the projection.

A batch's work splits three ways:

- the driver's serial part (plan, sync, commits): it stays whatever the cores;
- the work that spreads over any number of cores (reading and routing posts, dispatching
  matches, the JVM's share of the Spark job): it divides by C;
- matching: with a core per matcher (C >= N) a matcher's posts are matched on one core, so
  the batch waits for the busiest matcher's seconds; before that, matching divides by C
  like the rest.

So T(C) = serial + spread / C + max(match / C, slowest matcher); posts/s = posts / T(C).
A mapping that balances the matchers shortens the last term, which dividing all task
seconds by C (Amdahl's law over a batch) never sees.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.errors import InvalidArgumentError


@dataclass(frozen=True)
class BatchCosts:
    """One steady batch's measured seconds (means over the steady batches).

    Attributes:
        posts: posts a batch streamed.
        serial: the driver's plan, sync and commits.
        spread: route and dispatch task seconds, and the Spark job's time on the cores
            beyond the tasks' own (the JVM reading and handing posts over).
        match: the match seconds of every matcher, summed.
        slowest_matcher: the busiest matcher's match seconds.
    """

    posts: float
    serial: float
    spread: float
    match: float
    slowest_matcher: float

    def seconds_on(self, cores: int) -> float:
        """A batch's wall seconds on ``cores`` cores."""
        if cores < 1:
            raise InvalidArgumentError("cores must be at least 1")
        return self.serial + self.spread / cores + max(self.match / cores, self.slowest_matcher)

    def posts_per_second(self, cores: int) -> float:
        """Projected steady posts/s on ``cores`` cores."""
        return self.posts / self.seconds_on(cores)


def batch_costs(
    posts: float,
    serial: float,
    spark_job: float,
    local_cores: int,
    route: float,
    match: float,
    dispatch: float,
    slowest_matcher: float,
) -> BatchCosts:
    """:class:`BatchCosts` from a batch's figures on a machine of ``local_cores``: the Spark
    job's wall seconds times the cores, less the tasks' own seconds, is the JVM's share
    (never below zero: tasks that waited on each other overlap less)."""
    if local_cores < 1 or min(posts, serial, spark_job, route, match, dispatch) < 0:
        raise InvalidArgumentError("batch figures must be non-negative, cores at least 1")
    if slowest_matcher > match + 1e-9:
        raise InvalidArgumentError("the slowest matcher cannot take longer than all of them")
    jvm = max(0.0, spark_job * local_cores - (route + match + dispatch))
    return BatchCosts(posts, serial, route + dispatch + jvm, match, slowest_matcher)
