"""A tiny DOM from the standard library's html.parser, for checking report pages structurally."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID = {"meta", "input", "br", "img", "link", "hr", "source", "wbr", "area", "base", "col"}


@dataclass
class El:
    tag: str
    attrs: dict[str, str]
    parent: El | None = None
    children: list[El | str] = field(default_factory=list)

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self):
        yield self
        for c in self.children:
            if isinstance(c, El):
                yield from c.iter()

    def find_all(self, tag: str | None = None, **attrs: str) -> list[El]:
        out = []
        for el in self.iter():
            if tag is not None and el.tag != tag:
                continue
            if all(el.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items()):
                out.append(el)
        return out

    def find(self, tag: str | None = None, **attrs: str) -> El:
        found = self.find_all(tag, **attrs)
        assert found, f"no <{tag}> with {attrs}"
        return found[0]

    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = El("#root", {})
        self.cur = self.root

    def handle_starttag(self, tag, attrs):
        el = El(tag, {k: (v or "") for k, v in attrs}, self.cur)
        self.cur.children.append(el)
        if tag not in VOID:
            self.cur = el

    def handle_startendtag(self, tag, attrs):
        self.cur.children.append(El(tag, {k: (v or "") for k, v in attrs}, self.cur))

    def handle_endtag(self, tag):
        node = self.cur
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.cur = node.parent

    def handle_data(self, data):
        self.cur.children.append(data)


def parse(html: str) -> El:
    b = _Builder()
    b.feed(html)
    b.close()
    return b.root
