"""What a browser would build of an HTML view: the elements opened, the text shown, and the
text inside one kind of element (``mark`` for weak words, ``del`` for what ``refine`` removes)."""

from __future__ import annotations

from html.parser import HTMLParser


class Page(HTMLParser):
    """Feed it a page; then ``tags`` lists the elements opened, ``text`` the text shown and
    ``inside`` the text within a ``within`` element."""

    def __init__(self, within: str) -> None:
        super().__init__(convert_charrefs=True)
        self.within = within
        self.tags: list[str] = []
        self.text: list[str] = []
        self.inside: list[str] = []
        self._depth = 0

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self._depth += tag == self.within

    def handle_endtag(self, tag):
        self._depth -= tag == self.within

    def handle_data(self, data):
        self.text.append(data)
        if self._depth:
            self.inside.append(data)
