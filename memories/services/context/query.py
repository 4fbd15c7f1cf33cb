"""What a context is for: the query, given or built from the conversation's last turns."""

from __future__ import annotations

from typing import Any

# how many user turns of ``messages`` make the query, with the assistant's final replies
# among them (deer-flow's memory design)
QUERY_TURNS = 3
# the longest query made of them: what a query given as such may be (the API's limit,
# memories/api/context.py). Longer, PostgreSQL's to_tsvector of it in the keyword search
# costs more than the context is worth, and on some texts n²: a turn of 80,000
# characters of "<!--" held the request 20 s (10,000: 0.2 s)
QUERY_MAX_CHARS = 10_000
ROLES = ("user", "assistant", "system", "tool")


class MessagesInvalid(ValueError):
    """``errors`` names each bad item: {"messages[2].role": [...]}."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__("; ".join(f"{key}: {' '.join(m)}" for key, m in errors.items()))
        self.errors = errors


def messages_check(messages: Any) -> list[dict[str, Any]]:
    """``messages`` as a list of {role, content[, tool_calls]} objects, or
    MessagesInvalid naming each bad item."""
    if not isinstance(messages, list) or not messages:
        raise MessagesInvalid({"messages": ["Must be a non-empty list of {role, content}."]})
    errors: dict[str, list[str]] = {}
    for i, message in enumerate(messages):
        path = f"messages[{i}]"
        if not isinstance(message, dict):
            errors[path] = ["Must be an object with role and content."]
            continue
        if message.get("role") not in ROLES:
            errors[f"{path}.role"] = [f"Must be one of: {', '.join(ROLES)}."]
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            errors[f"{path}.content"] = ["Must be a string or null."]
        if "tool_calls" in message and not isinstance(message["tool_calls"], list | type(None)):
            errors[f"{path}.tool_calls"] = ["Must be a list or null."]
    if errors:
        raise MessagesInvalid(errors)
    return messages


def query_from_messages(messages: list[dict[str, Any]]) -> str:
    """The query of a conversation: its last QUERY_TURNS user turns and the final
    assistant replies among them (after the first of those turns), oldest first; tool
    messages and assistant messages that call tools are skipped (they are steps, not
    what the conversation is about), as deer-flow's memory middleware does. Counting
    user turns, not messages, keeps what the user said two turns ago when every turn
    has its reply. Of a longer text than QUERY_MAX_CHARS, its end (the latest words),
    from the first whole word."""
    turns: list[str] = []
    user_turns = length = 0
    for message in reversed(messages):
        content = _said(message)
        if not content:
            continue
        turns.append(content)
        length += len(content) + 1
        user_turns += message.get("role") == "user"
        # earlier turns cannot reach the tail: the "+ 1" keeps the character _tail reads
        if user_turns == QUERY_TURNS or length > QUERY_MAX_CHARS + 1:
            break
    return _tail("\n".join(reversed(turns)), QUERY_MAX_CHARS)


def _said(message: dict[str, Any]) -> str:
    """What a user turn or a final assistant reply says; "" for anything else (tool
    results, an assistant's tool-calling steps, system messages)."""
    role = message.get("role")
    final = role == "user" or (role == "assistant" and not message.get("tool_calls"))
    return (message.get("content") or "").strip() if final else ""


def _tail(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    tail = text[-limit:]
    if text[-limit - 1].isspace():
        return tail
    # the word cut in two is left out, unless the tail is one word
    space = next((at for at, character in enumerate(tail) if character.isspace()), None)
    return tail[space + 1 :] if space is not None else tail
