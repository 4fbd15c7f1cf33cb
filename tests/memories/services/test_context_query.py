"""The query of a context given ``messages``: the last 3 user turns and the final
assistant replies among them, tool messages and tool-calling steps skipped (deer-flow's
memory middleware), the latest words of it when it is too long."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memories.services.context.query import QUERY_MAX_CHARS, query_from_messages


def user(content):
    return {"role": "user", "content": content}


def reply(content):
    return {"role": "assistant", "content": content}


def tool_step(content="", name="search"):
    return {"role": "assistant", "content": content, "tool_calls": [{"name": name}]}


def tool_result(content):
    return {"role": "tool", "content": content}


def test_the_designs_example_keeps_all_three_user_turns():
    messages = [
        user("I'm working on a Python project"),
        reply("Great! What kind of project is it?"),
        user("It uses FastAPI and SQLAlchemy"),
        reply("A solid stack for APIs."),
        user("How do I write tests?"),
    ]
    assert query_from_messages(messages) == (
        "I'm working on a Python project\nGreat! What kind of project is it?\n"
        "It uses FastAPI and SQLAlchemy\nA solid stack for APIs.\nHow do I write tests?"
    )


def test_tool_messages_and_tool_calling_steps_are_skipped():
    messages = [
        user("an older question"),
        reply("an older answer"),
        user("what is the weather in Lisbon?"),
        tool_step(name="weather"),
        tool_result("24C sunny"),
        tool_step("Checking the forecast...", name="forecast"),
        tool_result("rain tomorrow"),
        reply("It is sunny, rain tomorrow."),
        {"role": "system", "content": "be brief"},
        user("and in Porto?"),
        tool_step(name="weather"),
        tool_result("19C cloudy"),
        reply("Cloudy, 19C."),
        user("thanks"),
    ]
    assert query_from_messages(messages) == (
        "what is the weather in Lisbon?\nIt is sunny, rain tomorrow.\n"
        "and in Porto?\nCloudy, 19C.\nthanks"
    )


def test_the_final_reply_after_the_last_user_turn_is_included():
    messages = [
        user("Tell me about my cat"),
        reply("Miso is a tabby."),
        user("How old is she?"),
        reply("Three."),
        user("What does she eat?"),
        tool_step(name="lookup"),
        tool_result("irrelevant tool output about tax returns"),
        reply("Salmon, mostly."),
    ]
    assert query_from_messages(messages) == (
        "Tell me about my cat\nMiso is a tabby.\nHow old is she?\nThree.\n"
        "What does she eat?\nSalmon, mostly."
    )


def test_with_fewer_than_three_user_turns_the_whole_conversation_is_the_query():
    messages = [
        user("first question"),
        reply("first answer"),
        user("what is the weather in Lisbon?"),
        tool_step(name="weather"),
        tool_result("24C sunny"),
        tool_step("Checking...", name="forecast"),
        tool_result("rain tomorrow"),
        reply("It is sunny, rain tomorrow."),
    ]
    assert query_from_messages(messages) == (
        "first question\nfirst answer\nwhat is the weather in Lisbon?\nIt is sunny, rain tomorrow."
    )


def _query_read_plainly(messages):
    """The query as the design words it, over the whole conversation at once."""
    said = [
        (m["role"], m["content"].strip())
        for m in messages
        if (m["role"] == "user" or (m["role"] == "assistant" and not m.get("tool_calls")))
        and m["content"].strip()
    ]
    users = [at for at, (role, _) in enumerate(said) if role == "user"]
    start = users[-3] if len(users) >= 3 else 0
    text = "\n".join(content for _, content in said[start:])
    if len(text) <= QUERY_MAX_CHARS:
        return text
    tail = text[-QUERY_MAX_CHARS:]
    if text[-QUERY_MAX_CHARS - 1].isspace():
        return tail
    # the word cut in two is left out, unless the tail is one word
    space = next((at for at, character in enumerate(tail) if character.isspace()), None)
    return tail if space is None else tail[space + 1 :]


MESSAGES = st.lists(
    st.builds(
        lambda role, words, repeat, calls: {
            "role": role,
            "content": " ".join([words] * repeat),
            **({"tool_calls": [{"name": "t"}]} if calls else {}),
        },
        st.sampled_from(["user", "assistant", "tool", "system"]),
        st.text(alphabet="ab \n", max_size=8),
        st.sampled_from([1, 1, 2, 800, 3000]),
        st.booleans(),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(MESSAGES)
def test_the_query_is_the_designs_whatever_the_conversation(messages):
    assert query_from_messages(messages) == _query_read_plainly(messages)
