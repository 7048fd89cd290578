"""The command line's words for the API's: ``--type``, not ``importType``.

The library and the server name the spec's fields (``importType``, ``matchingId``,
``eventId``); a command shows such a message with the option the user typed. The
mapping is read off the command itself: an option's Python name in camel case is the
field it sets (``import_type`` is ``importType``, given as ``--type``), so a new option
is mapped without being listed here. Only multi-word names (with a capital) that
a value or a word follows are replaced, so plain words ("message", "mode") and the
field names a message lists stay as they are.
"""

from __future__ import annotations

import re

import click

# Fields whose option's Python name is not the field's (none today; one place for them).
EXTRA_NAMES: dict[str, dict[str, str]] = {}


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(part[:1].upper() + part[1:] for part in rest)


def option_words(command: click.Command) -> dict[str, str]:
    """The spec's field names of ``command``'s options, each with its long option."""
    words: dict[str, str] = {}
    for param in command.params:
        if not isinstance(param, click.Option) or param.name is None:
            continue
        field = _camel(param.name)
        longs = [o for o in param.opts if o.startswith("--")]
        if longs and field != field.lower():
            words[field] = longs[0]
    words.update(EXTRA_NAMES.get(command.name or "", {}))
    return words


def in_cli_words(message: str, ctx: click.Context | None = None) -> str:
    """``message`` with every field name an option of the command sets replaced by the
    option (``matchingId 'x' is not a field`` becomes ``--matching-id 'x' is not a
    field``); ``ctx`` is the running command's, the current context by default."""
    ctx = ctx if ctx is not None else click.get_current_context(silent=True)
    if ctx is None:
        return message
    words = option_words(ctx.command)
    if not words:
        return message
    names = "|".join(map(re.escape, sorted(words, key=len, reverse=True)))
    # A name that a value or a verb follows ("eventId 9 is", "pass importType item") is
    # the option; one in a list ("its fields: id, registerId, eventId") is a record's
    # field and stays. "option codeField is 'x'" reads "--code-field is 'x'".
    pattern = re.compile(r"(?<![\w-])(?<!, )(?:option )?(" + names + r")(?=:? )")
    return pattern.sub(lambda match: words[match.group(1)], message)
