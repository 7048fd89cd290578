"""Run by :mod:`toolkit.store.arrow_read` in a process of its own; not imported.

Reads a query and its parameters (JSON on standard input: ``{"query": ..., "params":
[...]}``) from the SQLite file named by its argument with the ADBC SQLite driver, and
writes the result to standard output as an Arrow IPC stream.
It imports only pyarrow and the driver (0.2 s to start), nothing of the toolkit.
"""

from __future__ import annotations

import json
import sys

import adbc_driver_manager
import adbc_driver_sqlite
import pyarrow as pa

# The driver infers each column's type from the first batch of rows, and fails on a value
# of another type in a later batch (a column with no value in the first 1,024 rows is
# taken for integers). One batch of every row: each type is inferred from all values.
ONE_BATCH = str(1 << 30)


def main() -> None:
    path, asked = sys.argv[1], json.load(sys.stdin)
    with (
        adbc_driver_sqlite.connect(path) as database,
        adbc_driver_manager.AdbcConnection(database) as connection,
        adbc_driver_manager.AdbcStatement(connection) as statement,
    ):
        statement.set_options(**{"adbc.sqlite.query.batch_rows": ONE_BATCH})
        statement.set_sql_query(asked["query"])
        if asked["params"]:
            # One row of parameters, bound by position.
            values = [pa.array([value]) for value in asked["params"]]
            row = pa.record_batch(values, names=[str(n) for n in range(len(values))])
            schema, array = row.__arrow_c_array__()
            statement.bind(array, schema)
        handle, _rows = statement.execute_query()
        reader = pa.RecordBatchReader._import_from_c(handle.address)
        with pa.ipc.new_stream(sys.stdout.buffer, reader.schema) as stream:
            for batch in reader:
                stream.write_batch(batch)
        reader.close()


if __name__ == "__main__":
    main()
