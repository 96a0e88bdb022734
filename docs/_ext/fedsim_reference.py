"""Pages of the site that fedsim writes itself, so that they cannot fall behind the code.

- ``fedsim-cli``: every command of ``fedsim`` with every flag, its help and its default, read from
  the parser the command line runs (`fedsim.cli.commands.build_parser`).
- ``fedsim-strategies``: which strategy runs on which engine and why not where it does not, as
  ``fedsim strategies`` prints it (`fedsim.support`).

And two checks on what the API reference documents. A function, class or method it documents
must have a docstring. A docstring's `name` is checked: a name the reference documents links to
it; a name of fedsim's own that the reference leaves out (a module's helper, a class's attribute)
is shown as code if it exists, looked up as Python looks it up from where the docstring is;
anything else is left to Sphinx's nitpicky mode, which fails the build on it, so a renamed
function cannot leave a docstring pointing at nothing.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import re

from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx.util import logging

logger = logging.getLogger(__name__)


def _subcommands(parser: argparse.ArgumentParser, name: str):
    """Yield (command name, its parser) for ``parser`` and every command under it, depth first."""
    yield name, parser
    for action in parser._actions:  # argparse keeps its commands on the subparsers action alone
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for command, child in action.choices.items():
                if helps.get(command) == argparse.SUPPRESS:
                    continue
                yield from _subcommands(child, f"{name} {command}")


def _flag_list(parser: argparse.ArgumentParser) -> nodes.definition_list:
    """Return ``parser``'s flags as a definition list: the flag (and its metavar) above its help."""
    items = nodes.definition_list()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) or action.help == argparse.SUPPRESS:
            continue
        names = ", ".join(action.option_strings) or action.dest
        if action.option_strings and action.nargs != 0:
            names += f" {action.metavar or action.dest.upper()}"
        text = (action.help or "") % {**vars(action), "prog": parser.prog} if action.help else ""
        item = nodes.definition_list_item("", nodes.term("", "", nodes.literal(names, names)),
                                          nodes.definition("", nodes.paragraph(text, text)))
        items += item
    return items


class CommandLine(Directive):
    """``.. fedsim-cli::``: a section per command, its usage and its flags."""

    def run(self):
        from fedsim.cli.commands import build_parser

        sections = []
        for name, parser in _subcommands(build_parser(), "fedsim"):
            section = nodes.section(ids=[nodes.make_id(name)], names=[nodes.fully_normalize_name(name)])
            section += nodes.title(name, name)
            if parser.description:
                section += nodes.paragraph(parser.description, parser.description)
            usage = parser.format_usage().removeprefix("usage: ").strip()
            section += nodes.literal_block(usage, usage)
            section += _flag_list(parser)
            sections.append(section)
        return sections


class StrategyTable(Directive):
    """``.. fedsim-strategies::``: the table ``fedsim strategies`` prints."""

    def run(self):
        from fedsim.cli.flag_messages import flag_message
        from fedsim.support import format_support_table, support_table

        text = format_support_table(support_table(), wording=flag_message)
        return [nodes.literal_block(text, text)]


def _exists(dotted: str) -> bool:
    """Return whether ``dotted`` names a module, or an attribute (a dataclass field too) of one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            fields = getattr(value, "__dataclass_fields__", {}) or getattr(value, "__annotations__", {})
            if hasattr(value, name):
                value = getattr(value, name)
            elif name in fields:
                return name == parts[-1]
            else:
                return False
        return True
    return False


def _undocumented_but_real(app, env, node, contnode):
    """Show a reference to an existing name the reference does not document as code (Sphinx's
    ``missing-reference`` event); return None for a name that exists nowhere, which nitpicky reports."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip("~.")
    if target.startswith("fedsim ") and _is_command(target):
        return nodes.literal(target, target)
    module, owner = node.get("py:module"), node.get("py:class")
    documented = re.search(r"docstring of (\S+)", node.source or "")  # where autodoc read the docstring from
    scopes = [f"{module}.{owner}" if module and owner else "", *_enclosing(documented and documented.group(1)),
              *_enclosing(module)]
    if any(_exists(f"{scope}.{target}" if scope else target) for scope in [*scopes, ""]):
        return contnode
    return None


def _enclosing(dotted: str | None) -> list[str]:
    """Return ``dotted`` and each name above it: ``a.b.c``, ``a.b``, ``a``."""
    parts = dotted.split(".") if dotted else []
    return [".".join(parts[:cut]) for cut in range(len(parts), 0, -1)]


def _is_command(text: str) -> bool:
    """Return whether ``text`` is a command of ``fedsim``'s parser (``fedsim run``, ``fedsim flower deploy``)."""
    from fedsim.cli.commands import build_parser

    return text in {name for name, _ in _subcommands(build_parser(), "fedsim")}


def _refuse_an_empty_docstring(app, what, name, obj, options, signature, return_annotation):
    """Warn (an error under ``-W``) where the reference documents a name that has no docstring (at
    ``autodoc-process-signature``, which autodoc emits for every object it documents, with or without
    a docstring, where ``autodoc-process-docstring`` comes only with one)."""
    # a dataclass's fields are the attributes its own docstring's sections describe
    if what in {"function", "class", "exception", "method", "property"} and not (inspect.getdoc(obj) or "").strip():
        logger.warning("%s %s has no docstring: the API reference would show its name alone", what, name,
                       type="fedsim", subtype="no_docstring")


def setup(app):
    app.connect("missing-reference", _undocumented_but_real)
    app.connect("autodoc-process-signature", _refuse_an_empty_docstring)
    app.add_directive("fedsim-cli", CommandLine)
    app.add_directive("fedsim-strategies", StrategyTable)
    return {"parallel_read_safe": True, "version": "1"}
