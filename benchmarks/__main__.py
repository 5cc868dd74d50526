"""`python -m benchmarks`: the suite (benchmarks/suite.py says what it runs), in a process tuned
as the `seqq` command tunes its own (`seqq.process`) before anything loads torch."""

import sys

from seqq.process import tune_process

if __name__ == "__main__":
    tune_process()
    from benchmarks.suite import main

    sys.exit(main())
