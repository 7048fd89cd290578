"""A throwaway PostgreSQL cluster for tests and benchmarks: ``initdb`` + ``pg_ctl`` in a
temporary folder, listening on a Unix socket only (no TCP port to collide on).

PostgreSQL refuses to run as root, and CI runs as root: there the cluster's folder is
given to an unprivileged user (``nobody``) and the server runs as that user through
``runuser``; the tests, still root, connect over the socket as the cluster's superuser.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

# Where Debian's packages put the server (the versioned folder first: /usr/local/bin may
# hold only some of the links).
BIN_FOLDERS = (
    *sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True),
    Path("/usr/local/bin"),
    Path("/usr/bin"),
)
EXTENSIONS = ("postgis", "fuzzystrmatch", "pg_trgm")
SUPERUSER = "toolkit"
TEMPLATE = "toolkit_template"
# The server runs as this user when the tests run as root.
UNPRIVILEGED = "nobody"


def database_of(url: str) -> str:
    """The database a URL names (its path; the socket folder is in its query)."""
    from urllib.parse import urlsplit

    return urlsplit(url).path.lstrip("/")


class ClusterUnavailable(RuntimeError):
    """PostgreSQL (or PostGIS) cannot be had on this machine; the message says why."""


def find_binaries() -> Path:
    """The folder holding ``initdb``, ``pg_ctl`` and ``postgres``."""
    for folder in BIN_FOLDERS:
        if all((folder / name).exists() for name in ("initdb", "pg_ctl", "postgres")):
            return folder
    raise ClusterUnavailable(
        "no PostgreSQL server binaries (initdb, pg_ctl) under /usr/lib/postgresql/*/bin or "
        "/usr/local/bin; `.ci/run` installs postgresql-15-postgis-3"
    )


@dataclass
class Cluster:
    """A running cluster; :meth:`new_database` gives each test its own database."""

    folder: Path
    bin: Path
    _as_user: list[str] = field(default_factory=list)
    _counter: itertools.count[int] = field(default_factory=itertools.count)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def socket_dir(self) -> Path:
        return self.folder / "socket"

    def url(self, database: str) -> str:
        """The libpq URL of ``database`` (the socket folder as host, no password)."""
        return f"postgresql://{SUPERUSER}@/{database}?host={self.socket_dir}"

    def _run(self, *args: str) -> None:
        result = subprocess.run(
            [*self._as_user, *args], capture_output=True, text=True, check=False, timeout=120
        )
        if result.returncode != 0:
            raise ClusterUnavailable(
                f"{Path(args[0]).name} failed: {(result.stderr or result.stdout).strip()}"
            )

    def start(self) -> None:
        data = self.folder / "data"
        self.socket_dir.mkdir()
        if os.geteuid() == 0:
            if shutil.which("runuser") is None:
                raise ClusterUnavailable("running as root and no `runuser` to drop privileges")
            shutil.chown(self.folder, user=UNPRIVILEGED)
            shutil.chown(self.socket_dir, user=UNPRIVILEGED)
            self._as_user = ["runuser", "-u", UNPRIVILEGED, "--"]
        # -N: no fsync; a test cluster's data does not outlive the session.
        self._run(
            str(self.bin / "initdb"), "-D", str(data), "-U", SUPERUSER, "--auth=trust",
            "-N", "-E", "UTF8", "--locale=C",
        )  # fmt: skip
        options = (
            f"-c listen_addresses='' -c unix_socket_directories='{self.socket_dir}' "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
            "-c max_connections=60 -c shared_buffers=64MB"
        )
        self._run(
            str(self.bin / "pg_ctl"), "-D", str(data), "-o", options, "-w", "-t", "60",
            "-l", str(self.folder / "server.log"), "start",
        )  # fmt: skip
        self._make_template()

    def _make_template(self) -> None:
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {TEMPLATE}")
        try:
            with psycopg.connect(self.url(TEMPLATE), autocommit=True) as conn:
                for name in EXTENSIONS:
                    conn.execute(f"CREATE EXTENSION {name}")
        except psycopg.Error as exc:
            raise ClusterUnavailable(
                f"an extension is missing ({exc}); `.ci/run` installs postgresql-15-postgis-3"
            ) from exc

    def new_database(self) -> str:
        """A new database copied from the template (extensions in place); its URL."""
        import psycopg

        with self._lock:
            name = f"t{os.getpid()}_{next(self._counter)}"
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            # FILE_COPY: with fsync off a file copy is quicker than logging every page.
            conn.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE} STRATEGY FILE_COPY")
        return self.url(name)

    def password_login(self, url: str, role: str, password: str) -> str:
        """A role logging in with ``password`` (scram-sha-256 on the socket; the other
        roles keep trust) that owns the database of ``url``; the URL it connects by (no
        password in it)."""
        import psycopg
        from psycopg import sql

        name = database_of(url)
        hba = self.folder / "data" / "pg_hba.conf"
        # The first matching line counts: this role's line goes before the trust lines.
        hba.write_text(f"local all {role} scram-sha-256\n" + hba.read_text(), encoding="utf-8")
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                    sql.Identifier(role), sql.Literal(password)
                )
            )
            conn.execute(
                sql.SQL("ALTER DATABASE {} OWNER TO {}").format(
                    sql.Identifier(name), sql.Identifier(role)
                )
            )
            conn.execute("SELECT pg_reload_conf()")
        return f"postgresql://{role}@/{name}?host={self.socket_dir}"

    def drop_database(self, url: str) -> None:
        import psycopg

        name = database_of(url)
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def stop(self) -> None:
        data = self.folder / "data"
        if (data / "postmaster.pid").exists():
            subprocess.run(
                [*self._as_user, str(self.bin / "pg_ctl"), "-D", str(data), "-m", "immediate",
                 "-w", "stop"],
                capture_output=True, check=False, timeout=60,
            )  # fmt: skip
        shutil.rmtree(self.folder, ignore_errors=True)


def start_cluster() -> Cluster:
    """Start a cluster in a new folder under the system's temporary folder.

    Not under pytest's own temporary folders: those are private to the user running the
    tests (mode 0700), which the unprivileged server user could not enter, and a socket
    path must stay under ~100 characters.
    """
    try:
        import psycopg  # noqa: F401
    except ImportError as exc:
        raise ClusterUnavailable(f"psycopg is not installed ({exc})") from exc
    binaries = find_binaries()
    cluster = Cluster(Path(tempfile.mkdtemp(prefix="toolkit-pg-")), binaries)
    try:
        cluster.start()
    except BaseException:
        cluster.stop()
        raise
    return cluster
