# SPDX-License-Identifier: MIT
"""One rank of test_hcomm.py's job of transfers to several ranks (run by
the test, not by pytest): HCOMM_RANK, HCOMM_WORLD_SIZE (3) and
HCOMM_ROOT_ADDR are set.  Each rank's device array holds its own bytes
in the first half and bytes common to all ranks in the second; rank 0
gets from each rank by rank=, from rank 1 with rank 2 as its mirror, and
is refused a bad mirror and a rank outside the communicator.  Every rank
makes the same run() calls (the window is collective).  Prints one line
per check, "ok ..." or "FAIL ...", and exits 0 only if all passed."""
import sys

import numpy as np

import hcomm
import pypto

HALF = 32768
fails = 0


def check(cond, what):
    global fails
    print(("ok " if cond else "FAIL ") + what, flush=True)
    fails += 0 if cond else 1


def common():
    return (np.arange(HALF, dtype=np.uint32) * 2654435761 >> 24).astype(
        np.uint8)


def run_or_error(g, dev, comm, mirrors=None):
    try:
        return g.run(device=dev, comm=comm, mirrors=mirrors), None
    except pypto.PyptoError as e:
        return None, e


with hcomm.Communicator() as comm:
    r, n = comm.rank, comm.size
    dev = np.empty(2 * HALF, dtype=np.uint8)
    dev[:HALF] = r + 1
    dev[HALF:] = common()
    empty = pypto.Graph()
    if r != 0:
        for _ in range(4):
            run_or_error(empty, dev, comm)
        sys.exit(0)
    # 1: each rank's own bytes, by rank= (none: this rank)
    g = pypto.Graph()
    bufs = [np.zeros(HALF, dtype=np.uint8) for _ in range(n)]
    for k in range(n):
        g.get(bufs[k], 0, name="get%d" % k, rank=None if k == 0 else k)
    run, err = run_or_error(g, dev, comm)
    check(err is None and all(np.all(bufs[k] == k + 1) for k in range(n)),
          "gets by rank= read each rank's own bytes (%s)" % (err or "ok"))
    check(run is not None and run.stats["tiles_replaced"] == 0 and
          run.stats["ranks_lost"] == 0, "nothing re-placed, none lost")
    # 2: rank 1 with rank 2 as its mirror, nobody lost
    g = pypto.Graph()
    b = np.zeros(HALF, dtype=np.uint8)
    g.get(b, HALF, name="common1", rank=1)
    run, err = run_or_error(g, dev, comm, mirrors={1: 2})
    check(err is None and np.array_equal(b, common()) and
          run.stats["tiles_replaced"] == 0,
          "a mirror declared and not needed: rank 1's bytes (%s)"
          % (err or "ok"))
    # 3: a rank its own mirror
    run, err = run_or_error(g, dev, comm, mirrors={1: 1})
    check(err is not None and "mirror" in str(err),
          "a rank as its own mirror is refused: %s" % err)
    # 4: a rank outside the communicator
    g = pypto.Graph()
    g.get(b, 0, name="far", rank=5)
    run, err = run_or_error(g, dev, comm)
    check(err is not None and "outside 0..2" in str(err),
          "rank 5 of 3 is refused: %s" % err)
    # without a communicator, no mirrors; no rank below -1
    try:
        pypto.Graph().run(device=dev, mirrors={1: 2})
        check(False, "mirrors without comm= refused")
    except ValueError:
        check(True, "mirrors without comm= refused")
    try:
        pypto.Graph().get(b, 0, rank=-2)
        check(False, "rank=-2 refused")
    except pypto.PyptoError as e:
        check("rank -2" in str(e), "rank=-2 refused: %s" % e)
sys.exit(1 if fails else 0)
