#!/usr/bin/env python3
"""Drops every file of an index from the page cache (posix_fadvise DONTNEED), so that the next
process reads it from the disk: a cold search without the privileges dropping caches needs.

    eval/scale/page_cache.py INDEX_DIR
"""

import os
import sys


def evict(index_dir):
    """Drops every file under `index_dir` from the page cache."""
    for root, _, names in os.walk(index_dir):
        for name in names:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


if __name__ == "__main__":
    evict(sys.argv[1])
