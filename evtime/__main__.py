from evtime.cli import entry

entry()
