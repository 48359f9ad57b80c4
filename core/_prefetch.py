"""``prefetch(array, index)``: a cache hint for numba kernels (LLVM's ``llvm.prefetch``).

Why: the learners' kernels walk a token's posts in edge order and touch each post's row of
the routing state at a random place; once the state outgrows the caches (10M posts: 690 MB)
every edge waits for a miss. Asking for the row a few edges ahead overlaps those misses
(``s3tm bench learn --compare``: SALB's kernel 1.6x faster at 1M posts, 2.1x at 10M).
A prefetch never faults and changes no value, so it cannot change a result; it only has
to point at the element that will be read.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

# Edges to look ahead: enough to cover a miss at a few ns per edge, few enough that the
# hinted lines are still cached when read (8 and 16 were best on AMD EPYC, 32+ worse).
PREFETCH_DISTANCE = 8


@intrinsic
def _prefetch(typingctx, array, index):  # type: ignore[no-untyped-def]
    """Hint that ``array[index]`` (a 1-d array, an integer index) will be read soon."""
    if not isinstance(array, types.Array) or array.ndim != 1:
        return None
    if not isinstance(index, types.Integer):
        return None
    signature = types.void(array, index)

    def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
        array_type, _ = sig.args
        values = context.make_array(array_type)(context, builder, args[0])
        pointer = cgutils.get_item_pointer(  # type: ignore[no-untyped-call]
            context, builder, array_type, values, [args[1]], wraparound=False
        )
        byte_pointer = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        function = cgutils.get_or_insert_function(  # type: ignore[no-untyped-call]
            builder.module,
            ir.FunctionType(ir.VoidType(), [byte_pointer, i32, i32, i32]),
            "llvm.prefetch.p0",
        )
        # read (0), high temporal locality (3), data cache (1)
        builder.call(
            function,
            [builder.bitcast(pointer, byte_pointer), i32(0), i32(3), i32(1)],
        )
        return context.get_dummy_value()

    return signature, codegen


# numba calls an intrinsic without its typing context; this is how kernels see it
prefetch: Callable[[np.ndarray, int], None] = _prefetch  # type: ignore[assignment]
