"""A small HTML tree (standard library parser) and the checks the accessibility tests ask of
every rendered page: unique ids, references that resolve, an accessible name per control."""

from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID = {
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
    "track", "wbr",
}  # fmt: skip


@dataclass
class Node:
    tag: str
    attrs: dict
    parent: "Node | None" = None
    children: list = field(default_factory=list)

    def text(self) -> str:
        """Text content, skipping what assistive technology skips (aria-hidden)."""
        parts = []
        for child in self.children:
            if isinstance(child, str):
                parts.append(child)
            elif child.attrs.get("aria-hidden") != "true":
                parts.append(child.text())
        return " ".join(" ".join(parts).split())

    def walk(self):
        for child in self.children:
            if isinstance(child, Node):
                yield child
                yield from child.walk()

    def ancestors(self):
        node = self.parent
        while node is not None:
            yield node
            node = node.parent


class _TreeBuilder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {})
        self.current = self.root

    def handle_starttag(self, tag, attrs):
        node = Node(tag, {k: (v if v is not None else "") for k, v in attrs}, self.current)
        self.current.children.append(node)
        if tag not in VOID:
            self.current = node

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.current = self.current.parent

    def handle_endtag(self, tag):
        node = self.current
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.current = node.parent

    def handle_data(self, data):
        self.current.children.append(data)


def parse(html: str) -> Node:
    builder = _TreeBuilder()
    builder.feed(html)
    builder.close()
    return builder.root


def insert(page: Node, container_id: str, fragment: Node) -> Node:
    """Put a fragment into the element with ``container_id``, as an htmx swap would."""
    target = next(n for n in page.walk() if n.attrs.get("id") == container_id)
    for child in fragment.children:
        if isinstance(child, Node):
            child.parent = target
        target.children.append(child)
    return page


def duplicate_ids(root: Node) -> list[str]:
    seen, dupes = set(), []
    for node in root.walk():
        ident = node.attrs.get("id")
        if ident is None:
            continue
        if ident in seen:
            dupes.append(ident)
        seen.add(ident)
    return dupes


def dangling_references(root: Node) -> list[str]:
    """``for``, ``aria-labelledby``, ``aria-describedby``, ``aria-controls`` and ``form``
    naming an id the page does not have."""
    ids = {n.attrs["id"] for n in root.walk() if "id" in n.attrs}
    missing = []
    for node in root.walk():
        for attr in ("for", "aria-labelledby", "aria-describedby", "aria-controls", "form"):
            if node.tag not in ("label", "input", "select", "button", "textarea") and attr in (
                "for",
                "form",
            ):
                continue
            for ref in node.attrs.get(attr, "").split():
                if ref not in ids:
                    missing.append(f"<{node.tag} {attr}={ref}>")
    return missing


def accessible_name(root: Node, node: Node, labels: dict) -> str:
    """The name a screen reader announces, by the HTML-AAM order we use (no CSS)."""
    attrs = node.attrs
    if attrs.get("aria-labelledby"):
        by_id = {n.attrs.get("id"): n for n in root.walk()}
        return " ".join(by_id[r].text() for r in attrs["aria-labelledby"].split() if r in by_id)
    if attrs.get("aria-label", "").strip():
        return attrs["aria-label"].strip()
    if node.tag in ("input", "select", "textarea"):
        if attrs.get("id") in labels:
            return labels[attrs["id"]]
        wrapping = next((a for a in node.ancestors() if a.tag == "label"), None)
        if wrapping is not None:
            return wrapping.text()
        if attrs.get("type") in ("submit", "button", "reset"):
            return attrs.get("value", "")
    else:
        text = node.text()
        if text:
            return text
    return attrs.get("title", "").strip()


def controls(root: Node):
    """Every control a user can reach: buttons, links, and inputs that are not hidden."""
    for node in root.walk():
        if node.tag == "button" or node.tag in ("select", "textarea"):
            yield node
        elif node.tag == "a" and "href" in node.attrs:
            yield node
        elif node.tag == "input" and node.attrs.get("type", "text") != "hidden":
            yield node


def unnamed_controls(root: Node) -> list[str]:
    labels = {
        n.attrs["for"]: n.text() for n in root.walk() if n.tag == "label" and "for" in n.attrs
    }
    return [
        f"<{n.tag} {' '.join(f'{k}={v!r}' for k, v in n.attrs.items())}>"
        for n in controls(root)
        if not accessible_name(root, n, labels)
    ]


def names_of(root: Node, tag: str) -> list[str]:
    labels = {
        n.attrs["for"]: n.text() for n in root.walk() if n.tag == "label" and "for" in n.attrs
    }
    return [accessible_name(root, n, labels) for n in root.walk() if n.tag == tag]
