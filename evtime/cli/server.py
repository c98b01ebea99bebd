"""evtime server: the persistent local Spark Connect server used by --reuse-server."""

from __future__ import annotations

import click


@click.group(
    epilog="""
\b
Examples:
  evtime --help; evtime adjust --reuse-server --unit msec --range 999 in.csv
  evtime server start
  evtime server status
  evtime server stop
"""
)
def server() -> None:
    """Report on or stop the local server of --reuse-server.

    The first run with --reuse-server starts a Spark Connect server on loopback and later
    runs reuse it, saving the JVM start-up; it runs until stopped."""


@server.command(epilog="\b\nExamples:\n  evtime server start")
@click.option("-v", "--verbose", is_flag=True, help="Spark's warnings and full tracebacks.")
def start(verbose: bool) -> None:
    """Start the reused local server now (or find it running), without running a job: for a
    systemd unit or a boot script, so the first --reuse-server job is warm too."""
    from evtime.session import SessionOptions, build_session, server_status

    build_session(SessionOptions(reuse_server=True, verbose=verbose))
    info = server_status()
    if info is None:  # pragma: no cover - PySpark recorded nothing
        raise click.ClickException("the local server did not record itself")
    click.echo(f"running: {info['url']} pid {info['pid']} spark {info['spark']}")


@server.command(epilog="\b\nExamples:\n  evtime server status")
def status() -> None:
    """Whether the local server runs, where it listens, its pid.

    Never its token."""
    from evtime.session import server_status

    info = server_status()
    if info is None:
        click.echo("no evtime/PySpark local server recorded")
        return
    state = "running" if info["running"] else "not running (stale record)"
    click.echo(f"{state}: {info['url']} pid {info['pid']} spark {info['spark']}")
    click.echo(f"state directory: {info['directory']}")


@server.command(epilog="\b\nExamples:\n  evtime server stop")
def stop() -> None:
    """Stop the reused local server, if one runs."""
    from evtime.session import server_stop

    stopped = server_stop()
    if stopped is None:
        raise click.ClickException("could not inspect the recorded server; try again")
    click.echo("stopped the local server" if stopped else "no running local server found")
