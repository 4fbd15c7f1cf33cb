"""The console's text filters (console/templatetags/console_text.py): the search's marks
in a memory's text, and the metadata's one-line JSON."""

from django.template import Context, Template

from console.templatetags.console_text import highlight, json_text, query_terms


def test_highlighting_marks_word_starts_and_never_inside_an_entity():
    assert query_terms("What does she like? cats, dogs") == ["like", "cat", "dog"]
    assert highlight("A & B, amp", "amp") == "A &amp; B, <mark>amp</mark>"
    assert highlight("<i>x</i>", "i") == "&lt;i&gt;x&lt;/i&gt;"  # too short to mark
    assert highlight("scatter catalog", "cat") == "scatter <mark>catalog</mark>"


def test_a_template_marks_the_query_and_escapes_the_rest():
    template = Template("{% load console_text %}{{ text|highlight:query }}")
    html = template.render(Context({"text": "<b>cats</b> & dogs", "query": "cat"}))
    assert html == "&lt;b&gt;<mark>cats</mark>&lt;/b&gt; &amp; dogs"


def test_metadata_is_one_line_of_json_with_sorted_keys_and_escaped_in_a_template():
    assert json_text({"b": 1, "a": "café"}) == '{"a": "café", "b": 1}'
    assert json_text({}) == ""
    template = Template("{% load console_text %}{{ metadata|json_text }}")
    html = template.render(Context({"metadata": {"x": "<img>"}}))
    assert html == "{&quot;x&quot;: &quot;&lt;img&gt;&quot;}"
