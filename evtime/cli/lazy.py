"""Subcommands imported only when used (click's lazy-group pattern), so --help and usage
errors never import pyspark."""

from __future__ import annotations

import importlib
import importlib.util

import click


class LazyGroup(click.Group):
    def __init__(self, *args, commands: dict[str, str] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy = dict(commands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [n for n in self.lazy if self._available(n)]

    def _available(self, name: str) -> bool:
        module = self.lazy[name].split(":")[0]
        return importlib.util.find_spec(module) is not None

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.lazy or not self._available(name):
            return None
        module, attr = self.lazy[name].split(":")
        return getattr(importlib.import_module(module), attr)
