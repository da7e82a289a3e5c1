"""SQL as a language of its own, beside SPARQL: a statement check (`guard`) and read-only, bounded execution
(`executor`) on a database a `--kg` value names; `run_sql` is the one way SQL runs."""

from sparqlnav.sql.executor import SqlError, SqlRefused, SqlResult, SqlTimeout
from sparqlnav.sql.run import run_sql

__all__ = ["SqlError", "SqlRefused", "SqlResult", "SqlTimeout", "run_sql"]
