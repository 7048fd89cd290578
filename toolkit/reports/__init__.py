"""Reports: the catalogue, asynchronous runs, and contents as JSON, CSV, XLSX and HTML.

Modules: ``catalogue`` (what a report is), ``definitions`` (report definition files;
the built-in ones are ``defined/*.toml``), ``sources`` and ``builtin`` (the Python
they call),
``runner`` (queue, execute, render), ``execution`` (who executes a queued run),
``snapshot`` (the Parquet rows of a run), ``json_contents``, ``csv_file``,
``xlsx_file``, ``html_page`` (one renderer each), ``schema`` (``$schema``),
``waiting`` (asking a run's status until it ends).
"""

from __future__ import annotations

from toolkit.names import REPORT_FORMATS as FORMATS
from toolkit.reports.definitions import CATALOGUE
from toolkit.reports.execution import (
    DetachedProcessExecutor,
    ReportExecutor,
    ReportTask,
    ThreadExecutor,
    inline_executor,
    run_task,
)
from toolkit.reports.runner import MEDIA_TYPES, ReportRunner, instance_object
from toolkit.reports.schema import load_schema, schema_url

__all__ = [
    "CATALOGUE",
    "FORMATS",
    "MEDIA_TYPES",
    "DetachedProcessExecutor",
    "ReportExecutor",
    "ReportRunner",
    "ReportTask",
    "ThreadExecutor",
    "inline_executor",
    "instance_object",
    "load_schema",
    "run_task",
    "schema_url",
]
