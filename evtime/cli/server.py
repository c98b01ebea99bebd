"""evtime server: the persistent local Spark Connect server used by --reuse-server."""

from __future__ import annotations

import click


@click.group(
    epilog="""
\b
Examples:
  evtime --help; evtime adjust --reuse-server --unit msec --range 999 in.csv
  evtime server status
  evtime server stop
"""
)
def server() -> None:
    """Report on or stop the local server of --reuse-server.

    The first run with --reuse-server starts a Spark Connect server on loopback and later
    runs reuse it, saving the JVM start-up; it runs until stopped."""


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
