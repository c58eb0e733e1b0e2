"""A strict chat for parts tested on their own: a part that talks to the chat when the test expects it not to
fails the test, naming the call."""

from __future__ import annotations

from typing import Any


class NoChat:
    """A Notifier that is never to be used: any call fails with what was sent where."""

    def _unexpected(self, call: str, *args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"unexpected notifier.{call}{args}{kwargs or ''}: this test expects no message")

    async def send(self, *args: Any, **kwargs: Any) -> int | None:
        self._unexpected("send", *args, **kwargs)
        return None

    async def edit(self, *args: Any, **kwargs: Any) -> None:
        self._unexpected("edit", *args, **kwargs)

    async def send_document(self, *args: Any, **kwargs: Any) -> None:
        self._unexpected("send_document", *args, **kwargs)

    async def send_photo(self, *args: Any, **kwargs: Any) -> None:
        self._unexpected("send_photo", *args, **kwargs)

    async def send_album(self, *args: Any, **kwargs: Any) -> None:
        self._unexpected("send_album", *args, **kwargs)

    async def ask_owners(self, *args: Any, **kwargs: Any) -> None:
        self._unexpected("ask_owners", *args, **kwargs)

    async def buttons_settled(self) -> None:
        self._unexpected("buttons_settled")
