"""What a process keeps between requests: ``Kept``, one bounded store for it."""


class Kept(dict):
    """Values made once and kept per process under a key holding all they depend on (drawn
    HTML, rows read from the database under a version): bounded at ``most`` entries,
    emptied when full (what a page needs is made again on its next request; an LRU's
    bookkeeping would cost more than the making it saves)."""

    def __init__(self, most: int):
        super().__init__()
        self.most = most

    def keep(self, key, value):
        if len(self) >= self.most:
            self.clear()
        self[key] = value
        return value
