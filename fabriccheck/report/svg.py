"""Inline SVG built in code: the single place where figure text and attributes are escaped.

Every figure of the report is an :class:`Svg` whose elements are added with :meth:`Svg.add`;
attribute values, element text and ``<title>`` tooltips all pass through :func:`markupsafe.escape`
here, so a host named ``<script>`` or ``</svg>`` can never leave its text node. Tag and attribute
names come from this package only and are checked to be plain identifiers.
"""

from __future__ import annotations

import re
from functools import lru_cache

from markupsafe import Markup, escape

_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9_:-]*$")

#: state colours, shared by every figure and the CSS (keep in sync with style.css)
STATE_COLOURS = {
    "healthy": "#2f9e5b",
    "suspect": "#f0a202",
    "bad": "#d7263d",
    "hung": "#7a0019",
    "unreachable": "#6c4ab6",
    "untested": "#c4cad3",
}
STATUS_COLOURS = {
    "pass": "#2f9e5b",
    "fail": "#d7263d",
    "hang": "#7a0019",
    "unreachable": "#6c4ab6",
    "error": "#5f6b7a",
}
NO_DATA = "#eef1f5"
#: a failing test the run judged possible ECMP contention, with nobody blamed (not an alarm)
CONTENTION = "#8ec5e8"


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.2f}".rstrip("0").rstrip(".") if value != int(value) else str(int(value))
    return str(value)


@lru_cache(maxsize=256)
def _attr_name(key: str) -> str:
    name = key.rstrip("_").replace("_", "-")
    if not _NAME.match(name):
        raise ValueError(f"bad SVG attribute name {name!r}")
    return name


def _attrs(attrs: dict[str, object]) -> str:
    parts = []
    for key, value in attrs.items():
        if value is None:
            continue
        name = _attr_name(key)
        if isinstance(value, int | float):  # numbers need no escaping
            parts.append(f' {name}="{_fmt(value)}"')
        else:
            parts.append(f' {name}="{escape(str(value))}"')
    return "".join(parts)


class Svg:
    """An SVG figure of ``width`` x ``height`` user units, scaled to the page width.

    Parameters
    ----------
    width, height
        The viewBox size.
    label
        The figure's accessible name (escaped).
    """

    def __init__(self, width: float, height: float, label: str, css_class: str = "fig") -> None:
        self.width = width
        self.height = height
        self.label = label
        self.css_class = css_class
        self._parts: list[str] = []

    def add(
        self,
        tag: str,
        text: str | None = None,
        *,
        title: str | None = None,
        **attrs: object,
    ) -> None:
        """Append one element; ``text`` and ``title`` (a hover tooltip) are escaped."""
        if not _NAME.match(tag):
            raise ValueError(f"bad SVG tag {tag!r}")
        inner = ""
        if title:
            inner += f"<title>{escape(title)}</title>"
        if text is not None:
            inner += str(escape(text))
        if inner:
            self._parts.append(f"<{tag}{_attrs(attrs)}>{inner}</{tag}>")
        else:
            self._parts.append(f"<{tag}{_attrs(attrs)}/>")

    def open(self, tag: str, title: str | None = None, **attrs: object) -> None:
        """Open a container element (``g``, ``defs``, ``pattern``); close it with :meth:`close`."""
        if not _NAME.match(tag):
            raise ValueError(f"bad SVG tag {tag!r}")
        inner = f"<title>{escape(title)}</title>" if title else ""
        self._parts.append(f"<{tag}{_attrs(attrs)}>{inner}")

    def close(self, tag: str) -> None:
        if not _NAME.match(tag):
            raise ValueError(f"bad SVG tag {tag!r}")
        self._parts.append(f"</{tag}>")

    def open_group(self, title: str | None = None, **attrs: object) -> None:
        """Open a ``<g>``; close it with :meth:`close_group`."""
        self.open("g", title, **attrs)

    def close_group(self) -> None:
        self.close("g")

    def markup(self) -> Markup:
        """The ``<svg>`` element, safe to place in the page as is."""
        w, h = _fmt(round(self.width, 1)), _fmt(round(self.height, 1))
        head = (
            f'<svg xmlns="http://www.w3.org/2000/svg" class="{escape(self.css_class)}" '
            f'viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" '
            f'aria-label="{escape(self.label)}" preserveAspectRatio="xMinYMin meet">'
        )
        return Markup(head + "".join(self._parts) + "</svg>")

    def __len__(self) -> int:
        return len(self._parts)


def ratio_colour(ratio: float | None) -> str:
    """Heat colour of a measured/expected ratio: red (≤ 0.5) → amber (0.8) → green (≥ 0.95).

    >>> ratio_colour(1.0), ratio_colour(None)
    ('#2f9e5b', '#eef1f5')
    """
    if ratio is None:
        return NO_DATA
    stops = ((0.5, (215, 38, 61)), (0.8, (240, 162, 2)), (0.95, (47, 158, 91)))
    if ratio <= stops[0][0]:
        r, g, b = stops[0][1]
    elif ratio >= stops[-1][0]:
        r, g, b = stops[-1][1]
    else:
        for (x0, c0), (x1, c1) in zip(stops, stops[1:], strict=False):
            if x0 <= ratio <= x1:
                t = (ratio - x0) / (x1 - x0)
                r, g, b = (round(a + (bb - a) * t) for a, bb in zip(c0, c1, strict=True))
                break
    return f"#{r:02x}{g:02x}{b:02x}"
