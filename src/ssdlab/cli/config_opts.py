"""``--config FILE`` and ``--print-config`` for every ``ssdlab run SUITE`` (docs/config.md).

:func:`add_config_option` is called last in each suite's ``register``. It makes the
suite's settings default to "not given" (``argparse.SUPPRESS``), so that after parsing
the options present in the namespace are exactly those given on the command line, and
wraps the suite's command: before it runs, every setting not given on the command line
is taken from the config file, else from its default. File values are converted and
checked as command-line text is (the option's argparse type and choices), then the
suite validates them as usual; all before any I/O. Precedence: command line > file >
default.
"""

from __future__ import annotations

import argparse
import os
import re
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ssdlab.errors import ExitCode, UserError
from ssdlab.plan.config_schema import (
    MAX_CONFIG_BYTES,
    ConfigFile,
    Kind,
    Value,
    config_error,
    parse_config,
    printable,
    show,
    toml_value,
)
from ssdlab.store.masking import MASK, is_secret_option, mask_text

Command = Callable[[argparse.Namespace, list[str]], int]
_OPTION = re.compile(r"(?<![\w-])--([a-z][a-z0-9-]*)")


@dataclass(frozen=True)
class Setting:
    """One key of a suite's config schema, bound to its command-line option."""

    key: str
    kind: Kind
    action: argparse.Action
    default: object

    @property
    def dest(self) -> str:
        return self.action.dest

    def from_file(self, value: Value, config: ConfigFile) -> object:
        """A file value converted as argparse converts the same command-line text."""
        if self.kind is Kind.BOOL:
            return self.action.const if value else self.default
        text = value if isinstance(value, str) else repr(value)
        converted: object = text
        if self.action.type is not None:
            convert: Callable[[str], object] = self.action.type  # type: ignore[assignment]
            try:
                converted = convert(text)
            except (ValueError, TypeError, argparse.ArgumentTypeError) as exc:
                raise config.error(f"{self.key} {show(value)}: {_reason(exc, self.kind)}") from None
        choices = self.action.choices
        if choices is not None and converted not in choices:
            raise config.error(f"{self.key} {show(value)} is not one of: "
                               f"{', '.join(str(c) for c in choices)}")
        return converted

    def as_key_value(self, value: object) -> Value | None:
        """The namespace value as the config key's value (None: not set)."""
        if self.kind is Kind.BOOL:
            return bool(value == self.action.const)
        if value is None:
            return None
        if isinstance(value, bool | int | float | str):
            return value
        return str(value)  # --store: a Path


def _reason(exc: Exception, kind: Kind) -> str:
    if isinstance(exc, argparse.ArgumentTypeError):
        return str(exc)
    return f"not {kind.value}"


def settings_of(parser: argparse.ArgumentParser, suite: str) -> list[Setting]:
    """The suite's schema bound to its parser's options; every key must have one."""
    from ssdlab.suites import config_schemas
    by_option = {s: a for a in parser._actions for s in a.option_strings}
    settings = []
    for key, kind in config_schemas()[suite].items():
        action = by_option[f"--{key}"]
        settings.append(Setting(key, kind, action, parser.get_default(action.dest)))
    return settings


def add_config_option(parser: argparse.ArgumentParser) -> None:
    """Add --config and --print-config to a suite's parser; call it after set_defaults."""
    suite = parser.prog.rsplit(" ", 1)[-1]
    g = parser.add_argument_group("config file")
    g.add_argument("--config", metavar="FILE",
                   help="read settings from a TOML or JSON file: the long option names as "
                   "keys, e.g. max-rounds = 8; options given here override it "
                   "(docs/config.md)")
    g.add_argument("--print-config", action="store_true",
                   help="print the effective settings as TOML (a file --config reads) and "
                   "exit without running anything")
    settings = settings_of(parser, suite)
    for setting in settings:
        setting.action.default = argparse.SUPPRESS
    parser.set_defaults(func=ConfiguredCommand(suite, tuple(settings),
                                               parser.get_default("func")))


@dataclass(frozen=True)
class ConfiguredCommand:
    """A suite's command, run with its settings merged from the command line and a file."""

    suite: str
    settings: tuple[Setting, ...]
    command: Command

    def __call__(self, args: argparse.Namespace, argv: list[str]) -> int:
        config = read_config(args.config, self.suite) if args.config else None
        sources = self.merge(args, config)
        if args.print_config:
            sys.stdout.write(self.render(args, sources))
            return int(ExitCode.OK)
        from_file = {key for key, source in sources.items() if source.startswith("config ")}
        try:
            return self.command(args, argv)
        except UserError as exc:
            if config is None or type(exc) is not UserError or exc.exit_code != ExitCode.USAGE:
                raise
            raise blame_file(exc, config, from_file) from None

    def merge(self, args: argparse.Namespace, config: ConfigFile | None) -> dict[str, str]:
        """Fill ``args`` in precedence order; returns where each setting came from."""
        sources = {}
        for setting in self.settings:
            if hasattr(args, setting.dest):
                sources[setting.key] = "command line"
            elif config is not None and setting.key in config.values:
                setattr(args, setting.dest, setting.from_file(config.values[setting.key], config))
                sources[setting.key] = f"config {config.name}"
            else:
                setattr(args, setting.dest, setting.default)
                sources[setting.key] = "default"
        return sources

    def render(self, args: argparse.Namespace, sources: dict[str, str]) -> str:
        """The effective settings as TOML that ``--config`` reads back."""
        lines = [f"# ssdlab run {self.suite}: effective settings (command line, then "
                 "--config, then defaults)",
                 "# --target, --destroy-data and --dry-run are given on the command line only",
                 f"[{self.suite}]"]
        for setting in self.settings:
            value = setting.as_key_value(getattr(args, setting.dest))
            if value is None:
                lines.append(f"# {setting.key}: not set, the suite's default")
                continue
            shown = _masked(setting.key, value)
            if shown != value:
                lines.append(f"# {setting.key}: its secret is shown as {MASK}; keep a store's "
                             "password in ~/.pgpass or $PGPASSWORD (docs/store.md)")
            lines.append(f"{setting.key} = {toml_value(shown)}  # "
                         f"{printable(sources[setting.key])}")
        return "\n".join(lines) + "\n"


def _masked(key: str, value: Value) -> Value:
    """A setting's value as ``--print-config`` shows it: never a secret."""
    if not isinstance(value, str):
        return value
    return MASK if is_secret_option(f"--{key}") else mask_text(value)


def blame_file(exc: UserError, config: ConfigFile, from_file: set[str]) -> UserError:
    """A suite's refusal of a value that came from the file names the file and key."""
    message = exc.message
    match = _OPTION.search(message)
    if match is None or match.group(1) not in from_file:
        return exc
    key = match.group(1)
    return config.error(message[: match.start()] + key + message[match.end():])


def read_config(path_text: str, suite: str) -> ConfigFile:
    """Read and check a config file; nothing else is opened, nothing is written."""
    name = printable(path_text)
    path = Path(path_text)
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise config_error(name, "not a regular file")
        if st.st_size > MAX_CONFIG_BYTES:
            raise config_error(name, f"the file is larger than {MAX_CONFIG_BYTES // 1024} "
                               "KiB; a config file holds a few settings")
        with open(path, "rb") as fh:
            data = fh.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise config_error(name, "no such file") from None
    except (OSError, ValueError) as exc:  # permissions, a NUL in the path, ...
        raise config_error(name, f"cannot read it ({_os_reason(exc)})") from None
    from ssdlab.suites import config_schemas
    return parse_config(data, path_text, suite, config_schemas())


def _os_reason(exc: Exception) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
