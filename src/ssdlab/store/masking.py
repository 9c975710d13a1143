"""Secrets kept out of everything ssdlab stores and shows: one place for every mask.

A password, token or key given on the command line, in the environment or in a config
file (a store URL's password, libpq's ``password=`` parameter, ``--token``, any option
named for a secret) is replaced by ``***`` before it is stored (the run's command line,
plan, target and events; a set's command line), and again when a run is read (so runs
recorded before this existed are shown masked too), by ``store merge`` (both sides of
its comparison), by ``--print-config`` and in every error line. The store URL's display
(:func:`redact`) is the same mask.

What counts as a secret:

* the password of a URL's user part: ``postgresql://lab:PASSWORD@host/db``, any scheme;
* ``NAME=VALUE`` where NAME is one of libpq's secret parameters or a secret's name
  (``?password=...``, ``sslpassword=``, ``token=``...), in a URL's query or in any text;
* the value of a command-line option whose name has a secret's word in it: ``--token``,
  ``--password``, ``--api-key``, ``--db-passwd=...`` (words split at ``-`` and ``_``);
* in stored tables (dicts), a string under a key that names a secret unmistakably
  (``password``, ``secret``, ``api_key``, ``access_token``...); a bare ``token`` key is
  not one there: the database suite names its workspace's id so.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Sequence
from typing import Any

MASK = "***"
#: libpq's parameters that hold a secret (a passfile's path is not one, but its place is
#: nobody else's business either)
SECRET_PARAMS = ("password", "passfile", "sslpassword")
#: words that make an option's name a secret's (``--token``, ``--api-key``)
_SECRET_WORDS = frozenset({"password", "passwd", "passphrase", "pwd", "token", "secret",
                           "key", "apikey", "credential", "credentials", "sslpassword",
                           "passfile"})
#: words that make a stored key a secret's on their own; ``token`` and ``key`` only with
#: another word before them (``access_token``, ``api_key``)
_KEY_WORDS = frozenset({"password", "passwd", "passphrase", "secret", "apikey", "credential",
                        "credentials", "sslpassword", "passfile"})
#: a URL's user part with a password (also libpq's URL without ``//``, which ssdlab refuses
#: in a message that shows it)
_USERINFO = re.compile(r"(?P<head>(?:[A-Za-z][A-Za-z0-9+.-]*://|postgres(?:ql)?:)"
                       r"[^:/?#\s@]*):[^/?#\s]*@", re.IGNORECASE)
_NAMES = "|".join(sorted({*SECRET_PARAMS, "passwd", "passphrase", "token", "secret",
                          "api_key", "apikey", "access_token", "auth_token", "private_key"},
                         key=len, reverse=True))
_PARAM = re.compile(rf"(?<![\w-])(?P<name>{_NAMES})=(?P<value>'(?:[^'\\]|\\.)*'|[^&\s]*)",
                    re.IGNORECASE)
_OPTION = re.compile(r"(?P<opt>--[A-Za-z][\w-]*)(?P<sep>=|\s+)(?P<value>\S+)")


def _words(name: str) -> list[str]:
    return [w for w in re.split(r"[-_]+", name.lower().lstrip("-")) if w]


def is_secret_option(flag: str) -> bool:
    """Whether the command-line option ``flag`` (``--token``, ``--api-key``) holds a
    secret: a word of its name is a secret's."""
    return flag.startswith("-") and any(w in _SECRET_WORDS for w in _words(flag))


def is_secret_key(key: str) -> bool:
    """Whether a stored key names a secret unmistakably (see the module's docstring)."""
    words = _words(key)
    if any(w in _KEY_WORDS for w in words):
        return True
    return len(words) > 1 and words[-1] in ("token", "key")


def redact(url: str) -> str:
    """``url`` with the password in its user part and query parameters replaced."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<unparsable store URL>"
    if not parts.netloc:
        return mask_text(url)
    netloc = parts.netloc
    if "@" in netloc:
        user, _, host = netloc.rpartition("@")
        if ":" in user:
            user = user.split(":", 1)[0] + ":" + MASK
        netloc = f"{user}@{host}"
    query = parts.query
    if query:
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
        query = "&".join(f"{k}={MASK if k in SECRET_PARAMS else v}" for k, v in pairs)
    return (f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")
            + (f"#{parts.fragment}" if parts.fragment else ""))


def has_password(url: str) -> bool:
    """Whether the store URL ``url`` carries a password (user part or parameter)."""
    return mask_text(url) != url


def mask_text(text: str) -> str:
    """``text`` (a message, a path, a URL) with every secret in it masked: URL passwords
    and ``NAME=VALUE`` secrets."""
    if not text:
        return text
    text = _USERINFO.sub(lambda m: f"{m['head']}:{MASK}@", text)
    return _PARAM.sub(lambda m: f"{m['name']}={MASK}", text)


def _mask_word(word: str) -> str:
    """One word of a command line; a word holding a command line of its own (a matrix's
    ``--suite-options '--token X'``) has its secret options' values masked too."""
    word = mask_text(word)
    if not any(c.isspace() for c in word):
        return word
    return _OPTION.sub(lambda m: (f"{m['opt']}{m['sep']}{MASK}"
                                  if is_secret_option(m["opt"]) else m[0]), word)


def mask_argv(argv: Sequence[str]) -> list[str]:
    """A command line with every secret masked: the word after a secret's option, the
    value of ``--secret-option=VALUE``, and the secrets in every word."""
    out: list[str] = []
    after_secret = False
    for word in argv:
        word = str(word)
        if after_secret:
            out.append(MASK)
            after_secret = False
            continue
        flag, eq, _ = word.partition("=")
        if word.startswith("--") and is_secret_option(flag):
            if eq:
                out.append(f"{flag}={MASK}")
            else:
                out.append(word)
                after_secret = True
            continue
        out.append(_mask_word(word))
    return out


def mask_json(value: Any) -> Any:
    """A stored JSON value (a plan, a target, an event's detail) with every secret in it
    masked: lists of text as command lines, text through :func:`mask_text`, text under a
    secret's key replaced whole."""
    if isinstance(value, str):
        return mask_text(value)
    if isinstance(value, list):
        if value and all(isinstance(v, str) for v in value):
            return mask_argv(value)
        return [mask_json(v) for v in value]
    if isinstance(value, dict):
        return {k: (MASK if isinstance(v, str) and v and isinstance(k, str)
                    and is_secret_key(k) else mask_json(v)) for k, v in value.items()}
    return value


def mask_json_text(text: str | None) -> str | None:
    """A JSON column's text masked: the same text when it holds no secret (so nothing else
    of it changes), else the masked value's JSON."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return mask_text(text)
    masked = mask_json(value)
    return text if masked == value else json.dumps(masked, ensure_ascii=True)
