"""The SQLite library every connection of the service is made with.

Python's own ``sqlite3`` module links the SQLite of the system it was built on (Debian 12: 3.40,
from 2022). ``pysqlite3-binary`` is that DB-API module (from an older CPython: no ``blobopen``,
``serialize`` or ``setlimit``, and exceptions carry primary error codes only — the service uses
none of these) built against a recent SQLite (3.51 here). FTS5 has become much faster since 3.40:
BM25 ranking a keyword search's matches, the largest part of a search's time, took 34-39 % less
time on the peer bench's store (single-word searches of 21-300 matches 332 -> 219 µs, of
more than 300 matches 1.93 -> 1.17 ms).
Its wheels are built for Linux on x86-64; elsewhere the standard module is used, with the same
behaviour (the store needs nothing newer than 3.35's ``RETURNING``).

That SQLite is built with ``SQLITE_ENABLE_STAT4``, and with it a statement whose ``LIMIT`` is a bare
bound parameter was prepared again at every execution (the planner may use the value): 35-55 µs
more per keyword search or session page than a literal limit. The service's SQL writes its limits
as ``LIMIT ?+0``: an expression the planner does not look into, bound like any parameter
(``tests/unit/test_sqlite_driver.py`` keeps it so).

Everything that opens the service's database in a process must use this module: two copies of
SQLite in one process do not see each other's POSIX locks, and closing a file in one drops the
other's locks on it (https://www.sqlite.org/howtocorrupt.html:
"multiple copies of SQLite linked into the same application").
"""

from __future__ import annotations

try:
    from pysqlite3 import dbapi2 as sqlite3
except ImportError:  # no wheel for this platform: the Python's own SQLite
    import sqlite3  # type: ignore[no-redef]

__all__ = ["sqlite3"]
