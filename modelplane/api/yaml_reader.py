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

from collections.abc import Callable
from dataclasses import dataclass, field
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

# libyaml when the PyYAML wheel has it (every manylinux wheel does), else the pure parser.
_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
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


@dataclass
class _Frame:
    container: list[Any] | dict[Any, Any]
    line: int
    anchor: str | None
    nodes: int = 1
    depth: int = 1
    key: Any = None
    has_key: bool = False
    key_lines: dict[Any, int] = field(default_factory=dict)
    merges: list[dict[Any, Any]] = field(default_factory=list)


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
    text = f"not valid YAML: {problem}{where}" + (f", {context}" if context else "")
    return YamlInputError(text, index, line)


class _Builder:
    def __init__(self) -> None:
        self.index = 0
        self.doc_line = 1
        self.doc_nodes = 0
        self.root: Any = None
        self.stack: list[_Frame] = []
        self.anchors: dict[str, tuple[Any, int, int]] = {}   # value, nodes, depth
        self.documents: list[Document] = []

    def run(self, text: str) -> list[Document]:
        for event in yaml.parse(text, Loader=_LOADER):
            if isinstance(event, ScalarEvent):
                value = _scalar(event, self.index)
                self._add(value, event, 1, 0)
                if event.anchor is not None:
                    self.anchors[event.anchor] = (value, 1, 0)
            elif isinstance(event, (MappingStartEvent, SequenceStartEvent)):
                if len(self.stack) >= MAX_YAML_DEPTH:
                    self._fail(f"nested more than {MAX_YAML_DEPTH} levels deep", event)
                container: list[Any] | dict[Any, Any] = {} if isinstance(event, MappingStartEvent) else []
                self.stack.append(_Frame(container, _line(event), event.anchor))
            elif isinstance(event, (MappingEndEvent, SequenceEndEvent)):
                frame = self.stack.pop()
                if isinstance(frame.container, dict) and frame.merges:
                    for merged in frame.merges:
                        for key, value in merged.items():
                            frame.container.setdefault(key, value)
                if frame.anchor is not None:
                    self.anchors[frame.anchor] = (frame.container, frame.nodes, frame.depth)
                self._add(frame.container, event, frame.nodes, frame.depth, frame.line)
            elif isinstance(event, AliasEvent):
                target = self.anchors.get(event.anchor or "")
                if target is None:
                    self._fail(f"alias *{event.anchor} refers to no anchor defined before it in this document",
                               event)
                value, nodes, depth = target
                if len(self.stack) + depth > MAX_YAML_DEPTH:
                    self._fail(f"alias *{event.anchor} nests more than {MAX_YAML_DEPTH} levels deep", event)
                self._add(value, event, nodes, depth)
            elif isinstance(event, DocumentStartEvent):
                self.doc_line, self.doc_nodes, self.root = _line(event), 0, None
            elif isinstance(event, DocumentEndEvent):
                self.documents.append(Document(self.index, self.doc_line, self.root))
                self.index += 1
                self.anchors = {}
        return self.documents

    def _fail(self, message: str, event: Any) -> NoReturn:
        raise YamlInputError(message, self.index, _line(event))

    def _add(self, value: Any, event: Any, nodes: int, depth: int, line: int | None = None) -> None:
        self.doc_nodes += nodes if type(event) is AliasEvent else 0
        if self.doc_nodes > MAX_YAML_NODES:
            self._fail(f"aliases expand to more than {MAX_YAML_NODES} values; write the values out or "
                       "use fewer aliases", event)
        if not self.stack:
            self.root = value
            return
        top = self.stack[-1]
        top.nodes += nodes
        top.depth = max(top.depth, depth + 1)
        container = top.container
        if type(container) is list:
            container.append(value)
            return
        if not top.has_key:
            here = line if line is not None else _line(event)
            if value is _MERGE:
                top.key, top.has_key = _MERGE, True
                return
            if isinstance(value, (dict, list)):
                raise YamlInputError("a mapping key must be a plain value, not a mapping or a list",
                                     self.index, here)
            first = top.key_lines.get(value)
            if first is not None:
                raise YamlInputError(f"duplicate key {quoted(value)} (first at line {first}); a key may appear once "
                                     "in a mapping: remove or merge one of them", self.index, here)
            top.key_lines[value] = here
            top.key, top.has_key = value, True
            return
        key = top.key
        top.key, top.has_key = None, False
        if key is _MERGE:
            merged = value if isinstance(value, list) else [value]
            if not all(isinstance(m, dict) for m in merged):
                self._fail("a merge key (<<) takes a mapping or a list of mappings", event)
            top.merges.extend(merged)
            return
        assert isinstance(container, dict)
        container[key] = value
