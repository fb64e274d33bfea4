"""YAML text to plain Python documents, strictly and within bounds.

libyaml (PyYAML's C parser) produces the events and this module builds the values from
them, instead of PyYAML's composer and constructor, for three reasons:

* duplicate keys are errors with both lines (PyYAML keeps the last value silently);
* nesting depth and alias expansion are bounded before anything recurses: libyaml's
  event parser keeps its own stack, and the builder here is a loop, so no input reaches
  Python's recursion limit or the C stack;
* it is fast: libyaml parses, one pass builds (about 10x PyYAML's pure loader).

Scalars resolve and convert exactly as `yaml.safe_load` does (YAML 1.1 core types), except
that integers must fit in int64 as in the Kubernetes API. Every error carries the
document index and line, and never quotes a value (only key names and tags).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NoReturn

import yaml
from yaml.events import (
    AliasEvent,
    DocumentEndEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)
from yaml.nodes import ScalarNode

from modelplane.limits import MAX_INT_DIGITS, MAX_YAML_DEPTH, MAX_YAML_NODES

from .common import quoted

# libyaml when the PyYAML wheel has it (every manylinux wheel does), else the pure parser: ten
# times faster (also sim/cluster.py's, for the CRDs of the tools).
SAFE_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_RESOLVER = yaml.resolver.Resolver()
# yaml_implicit_resolvers by first character, as PyYAML's composer resolves a plain scalar.
_resolve: Callable[[type, str, tuple[bool, bool]], str] = _RESOLVER.resolve
_CONSTRUCTOR = yaml.constructor.SafeConstructor()
_INT64 = range(-(2**63), 2**63)
_TAG = "tag:yaml.org,2002:"
_MERGE_TAG = _TAG + "merge"


class YamlInputError(ValueError):
    """Text that is not YAML this program accepts; `index` is the document, `line` 1-based."""

    def __init__(self, message: str, index: int, line: int | None) -> None:
        super().__init__(message)
        self.message, self.index, self.line = message, index, line


@dataclass(frozen=True)
class Document:
    index: int     # position in the stream, empty documents included
    line: int      # 1-based line where the document starts
    value: Any     # None for an empty document


class _Frame:
    """An open mapping or sequence. `mark` is where it starts (lines are computed from marks
    only for an error); `nodes` and `depth` are what it holds once closed, for aliases."""

    __slots__ = ("container", "mark", "anchor", "nodes", "depth", "key", "has_key", "key_marks", "merges")

    def __init__(self, container: list[Any] | dict[Any, Any], mark: Any, anchor: str | None) -> None:
        self.container = container
        self.mark = mark
        self.anchor = anchor
        self.nodes = 1
        self.depth = 1
        self.key: Any = None
        self.has_key = False
        self.key_marks: dict[Any, Any] = {}     # key -> where it stands, for a duplicate's message
        self.merges: list[dict[Any, Any]] = []


def _line(event: Any) -> int:
    return int(event.start_mark.line) + 1


def _scalar(event: ScalarEvent, index: int) -> Any:
    tag = event.tag
    value = event.value
    if tag is None or tag == "!":
        tag = _resolve(ScalarNode, value, event.implicit)
    if tag == _TAG + "str":
        return value
    if tag == _MERGE_TAG:
        return _MERGE
    if tag == _TAG + "int":
        if len(value) > MAX_INT_DIGITS:
            raise YamlInputError(f"an integer written with {len(value)} characters is too long (at most "
                                 f"{MAX_INT_DIGITS}); Kubernetes API integers are 64-bit", index, _line(event))
        number = _construct(tag, event, index)
        if number not in _INT64:
            raise YamlInputError("an integer does not fit in 64 bits; Kubernetes API integers are int64",
                                 index, _line(event))
        return number
    if tag in _SCALAR_TAGS:
        return _construct(tag, event, index)
    raise YamlInputError(f"unsupported tag {quoted(tag)}; manifests use plain YAML values only", index, _line(event))


_SCALAR_TAGS = {_TAG + t for t in ("null", "bool", "int", "float", "timestamp", "binary")}


def _construct(tag: str, event: ScalarEvent, index: int) -> Any:
    node = ScalarNode(tag, event.value, None, None, event.style)
    try:
        # The per-tag function, not construct_object: that one memoizes every node it sees.
        return _CONSTRUCTOR.yaml_constructors[tag](_CONSTRUCTOR, node)
    except yaml.YAMLError as exc:
        why = getattr(exc, "problem", None) or type(exc).__name__
        raise YamlInputError(f"not a valid {tag.removeprefix(_TAG)}: {why}", index, _line(event)) from None
    except ValueError as exc:   # e.g. a day out of range; the message quotes no input
        raise YamlInputError(f"not a valid {tag.removeprefix(_TAG)}: {exc}", index, _line(event)) from None


class _Merge:
    """The `<<` merge key, told apart from a string key '<<'."""

    __slots__ = ()


_MERGE = _Merge()
_UNSEEN = object()


def read_documents(text: str) -> list[Document]:
    """Every document of a YAML stream; YamlInputError on the first problem."""
    builder = _Builder()
    try:
        return builder.run(text)
    except yaml.YAMLError as exc:
        raise _syntax_error(exc, builder.index, text) from None


def _syntax_error(exc: yaml.YAMLError, index: int, text: str) -> YamlInputError:
    # Never str(exc): PyYAML's pure parser prints a snippet of the offending line.
    if isinstance(exc, yaml.reader.ReaderError):
        line = text.count("\n", 0, exc.position) + 1 if isinstance(exc.position, int) else None
        code = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "\0")
        return YamlInputError(f"not valid YAML: the character #x{code:04x} is not allowed ({exc.reason}); "
                              "remove it or quote it with an escape such as \"\\t\"", index, line)
    problem = getattr(exc, "problem", None) or type(exc).__name__
    mark = getattr(exc, "problem_mark", None)
    context = getattr(exc, "context", None)
    line = int(mark.line) + 1 if mark is not None else None
    where = f" (column {int(mark.column) + 1})" if mark is not None else ""
    started = getattr(exc, "context_mark", None)
    # Where what the problem interrupts began (an unclosed quote or bracket), when that is an
    # earlier line than where the parser noticed: the line to look at first.
    begun = (f" that starts at line {int(started.line) + 1}" if context and started is not None and line is not None
             and int(started.line) + 1 < line else "")
    text = f"not valid YAML: {problem}{where}" + (f", {context}{begun}" if context else "")
    return YamlInputError(text, index, line)


class _Builder:
    def __init__(self) -> None:
        self.index = 0
        self.documents: list[Document] = []

    def run(self, text: str) -> list[Document]:
        # One loop over libyaml's events, the hot names bound locally: this is most of the
        # time `plan` spends reading manifests.
        stack: list[_Frame] = []
        anchors: dict[str, tuple[Any, int, int]] = {}     # value, nodes, depth
        # A plain scalar's value depends on its text alone: each distinct text is resolved
        # once per stream (the values are immutable, and PyYAML's own constructors return
        # one shared object for some, such as NaN, so sharing changes no equality).
        plain: dict[str, Any] = {}
        root: Any = None
        doc_line = 1
        doc_nodes = 0
        where: Any = None          # the mark of the value being added
        # Any: the loop dispatches on the exact class (`type(...) is`), which mypy cannot narrow on.
        events: Iterator[Any] = yaml.parse(text, Loader=SAFE_LOADER)
        for event in events:
            cls = type(event)
            if cls is ScalarEvent:
                if event.tag is None and event.implicit[0]:
                    value = plain.get(event.value, _UNSEEN)
                    if value is _UNSEEN:
                        value = plain[event.value] = _scalar(event, self.index)
                elif event.tag is None:
                    value = event.value       # quoted: a string
                else:
                    value = _scalar(event, self.index)
                if event.anchor is not None:
                    anchors[event.anchor] = (value, 1, 0)
                nodes, depth, where = 1, 0, event.start_mark
            elif cls is MappingStartEvent or cls is SequenceStartEvent:
                if len(stack) >= MAX_YAML_DEPTH:
                    self._fail(f"nested more than {MAX_YAML_DEPTH} levels deep", event)
                stack.append(_Frame({} if cls is MappingStartEvent else [], event.start_mark, event.anchor))
                continue
            elif cls is MappingEndEvent or cls is SequenceEndEvent:
                frame = stack.pop()
                value = frame.container
                if frame.merges and type(value) is dict:
                    for merged in frame.merges:
                        for key, item in merged.items():
                            value.setdefault(key, item)
                nodes, depth, where = frame.nodes, frame.depth, frame.mark
                if frame.anchor is not None:
                    anchors[frame.anchor] = (value, nodes, depth)
            elif cls is AliasEvent:
                target = anchors.get(event.anchor or "")
                if target is None:
                    self._fail(f"alias *{event.anchor} refers to no anchor defined before it in this document",
                               event)
                value, nodes, depth = target
                if len(stack) + depth > MAX_YAML_DEPTH:
                    self._fail(f"alias *{event.anchor} nests more than {MAX_YAML_DEPTH} levels deep", event)
                doc_nodes += nodes
                if doc_nodes > MAX_YAML_NODES:
                    self._fail(f"aliases expand to more than {MAX_YAML_NODES} values; write the values out or "
                               "use fewer aliases", event)
                where = event.start_mark
            elif cls is DocumentStartEvent:
                doc_line, doc_nodes, root = _line(event), 0, None
                continue
            elif cls is DocumentEndEvent:
                self.documents.append(Document(self.index, doc_line, root))
                self.index += 1
                anchors = {}
                continue
            else:
                continue
            # The value (a scalar, a closed container or an alias) goes into the open container.
            if not stack:
                root = value
                continue
            top = stack[-1]
            top.nodes += nodes
            if depth >= top.depth:
                top.depth = depth + 1
            container = top.container
            if type(container) is list:
                container.append(value)
            elif top.has_key:
                key = top.key
                top.key, top.has_key = None, False
                if key is _MERGE:
                    merged_in = value if isinstance(value, list) else [value]
                    if not all(isinstance(m, dict) for m in merged_in):
                        self._fail("a merge key (<<) takes a mapping or a list of mappings", event)
                    top.merges.extend(merged_in)
                else:
                    container[key] = value
            elif value is _MERGE:
                top.key, top.has_key = _MERGE, True
            elif isinstance(value, (dict, list)):
                raise YamlInputError("a mapping key must be a plain value, not a mapping or a list",
                                     self.index, int(where.line) + 1)
            else:
                first = top.key_marks.get(value)
                if first is not None:
                    raise YamlInputError(f"duplicate key {quoted(value)} (first at line {int(first.line) + 1}); a key "
                                         "may appear once in a mapping: remove or merge one of them",
                                         self.index, int(where.line) + 1)
                top.key_marks[value] = where
                top.key, top.has_key = value, True
        return self.documents

    def _fail(self, message: str, event: Any) -> NoReturn:
        raise YamlInputError(message, self.index, _line(event))
