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


@server.command(
    epilog="\b\nExamples:\n  evtime server start\n"
    "  evtime server start --conf spark.driver.memory=4g"
)
@click.option(
    "--conf",
    multiple=True,
    metavar="KEY=VALUE",
    help="Spark setting of the server it starts (repeatable; env EVTIME_CONF=K=V,K=V).",
)
@click.option("-v", "--verbose", is_flag=True, help="Spark's warnings and full tracebacks.")
def start(conf: tuple[str, ...], verbose: bool) -> None:
    """Start the reused local server now (or find it running), without running a job: for a
    systemd unit or a boot script, so the first --reuse-server job is warm too.  A recorded
    server that does not answer is stopped and a fresh one started.  The settings (--conf,
    EVTIME_CONF) are those the server starts with, as for the first --reuse-server run; a
    running server keeps its own."""
    from evtime.session import SessionOptions, build_session, server_status

    build_session(SessionOptions.from_cli(None, None, conf, verbose, reuse_server=True))
    info = server_status()
    if info is None:  # pragma: no cover - PySpark recorded nothing
        raise click.ClickException("the local server did not record itself")
    click.echo(f"running: {info['url']} pid {info['pid']} spark {info['spark']}")


# `evtime server status` exits as `systemctl is-active` does: 0 running, 3 not running
NOT_RUNNING = 3
# ... and 1 when it runs but does not answer (a sick server: `evtime server start` restarts it)
SICK = 1


@server.command(epilog="\b\nExamples:\n  evtime server status || evtime server start")
@click.pass_context
def status(ctx: click.Context) -> None:
    """Whether the local server runs and answers, where it listens, its pid.

    Exits 0 when it runs and answers, 3 when none runs (as systemctl is-active does), 1 when
    it runs but does not answer (`evtime server start` restarts it).

    Never its token."""
    from evtime.session import server_status

    info = server_status()
    if info is None:
        click.echo("not running: no evtime/PySpark local server recorded")
        ctx.exit(NOT_RUNNING)
    state = "running" if info["running"] else "not running (stale record)"
    click.echo(f"{state}: {info['url']} pid {info['pid']} spark {info['spark']}")
    click.echo(f"state directory: {info['directory']}")
    if not info["running"]:
        ctx.exit(NOT_RUNNING)
    from evtime.session import health_timeout, server_answers

    if not server_answers():
        click.echo(
            f"not answering: the server accepts connections but did not answer within "
            f"{health_timeout():g}s (out of heap?); `evtime server start` restarts it"
        )
        ctx.exit(SICK)


@server.command(epilog="\b\nExamples:\n  evtime server stop")
def stop() -> None:
    """Stop the reused local server, if one runs."""
    from evtime.session import server_stop

    stopped = server_stop()
    if stopped is None:
        raise click.ClickException("could not inspect the recorded server; try again")
    click.echo("stopped the local server" if stopped else "no running local server found")
