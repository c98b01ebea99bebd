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
    """Report on or stop the local Spark Connect server that --reuse-server starts."""


@server.command(epilog="\b\nExamples:\n  evtime server status")
def status() -> None:
    """Whether the reused local server runs, where it listens and its pid (never its token)."""
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
