"""Run by :mod:`toolkit.store.arrow_read` in a process of its own; not imported.

Reads the query on standard input from the SQLite file named by its argument with the
ADBC SQLite driver and writes the result to standard output as an Arrow IPC stream.
It imports only pyarrow and the driver (0.2 s to start), nothing of the toolkit.
"""

from __future__ import annotations

import sys

import adbc_driver_manager
import adbc_driver_sqlite
import pyarrow as pa

# The driver infers each column's type from the first batch of rows, and fails on a value
# of another type in a later batch (a column with no value in the first 1,024 rows is
# taken for integers). One batch of every row: each type is inferred from all values.
ONE_BATCH = str(1 << 30)


def main() -> None:
    path, query = sys.argv[1], sys.stdin.read()
    with (
        adbc_driver_sqlite.connect(path) as database,
        adbc_driver_manager.AdbcConnection(database) as connection,
        adbc_driver_manager.AdbcStatement(connection) as statement,
    ):
        statement.set_options(**{"adbc.sqlite.query.batch_rows": ONE_BATCH})
        statement.set_sql_query(query)
        handle, _rows = statement.execute_query()
        reader = pa.RecordBatchReader._import_from_c(handle.address)
        with pa.ipc.new_stream(sys.stdout.buffer, reader.schema) as stream:
            for batch in reader:
                stream.write_batch(batch)
        reader.close()


if __name__ == "__main__":
    main()
