"""Every regular expression of the product, reviewed (issue 45).

A pattern that backtracks can hold a worker for minutes on one message: issue 45's
CLAUSE_BREAK took n³ steps on a run of n spaces. So each pattern is listed in REVIEWED
with a note saying why it runs in time linear in its text, and this test finds every
pattern the product compiles (``re.compile``, ``re.search`` and the other ``re``
functions, and the fact extractor's ``@rule``), by walking the modules' syntax, and
compares. A new or changed pattern fails here until someone has reviewed it.

A pattern is known by where it is (file, and the name it is assigned to, or the function
or rule it is in) and a digest of its text (evaluated in its module for a pattern built
from constants, its source for one built at run time), not by line number."""

from __future__ import annotations

import ast
import hashlib
import importlib
from pathlib import Path
from typing import Any

from django.conf import settings

PACKAGES = ("memoryhub", "memories", "ingestion", "synopsis", "console")
RE_FUNCTIONS = {"compile", "search", "match", "fullmatch", "sub", "subn", "split"}
RE_FUNCTIONS |= {"findall", "finditer"}
# product functions whose first argument is a regular expression, per module
REGEX_TAKERS = {"synopsis/extraction_rules.py": {"rule"}}
ROOT = Path(settings.BASE_DIR)

HOW_TO = """
Review each pattern for super-linear backtracking: nested quantifiers, adjacent
quantifiers over the same characters ("\\s*,?\\s+"), an alternation under a star whose
branches overlap, ".*" or "\\s*" before something that can fail far away, a pattern
that starts with a quantifier tried at every position of a run (start it where the run
starts: "(?<!\\s)\\s+"). Rewrite it so each character is consumed one way (possessive
"*+", "++"), or bound the text it sees. If user text reaches it, make sure a function
that runs it is in tests/test_text_linear.py FUNCTIONS (the fact extractor's patterns
are checked there one by one). Then add its line to REVIEWED in {file} with a note
saying why it is linear (a changed pattern has a new digest: replace its old line):
"""


def _digest(pattern: str | bytes) -> str:
    text = pattern if isinstance(pattern, bytes) else pattern.encode()
    return hashlib.sha1(text).hexdigest()[:10]  # an identity, not a secret


class _Finder(ast.NodeVisitor):
    """The pattern arguments of one module's regex calls, each with its site."""

    def __init__(self, path: str, namespace: dict[str, Any]) -> None:
        self.path, self.namespace = path, namespace
        self.scope: list[str] = []
        self.found: dict[str, str] = {}  # "scope digest" -> pattern
        self.takers = REGEX_TAKERS.get(path, set())

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for decorator in node.decorator_list:
            self._scoped(f"@{ast.unparse(decorator).split('(')[0]} {node.name}", decorator)
        self._scoped(node.name, *node.body)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._scoped(node.name, *node.body)

    def visit_Assign(self, node: ast.Assign | ast.AnnAssign) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if node.value is not None:  # at module level the site is the name assigned
            self._scoped("" if self.scope else ast.unparse(targets[0]), node.value)

    visit_AnnAssign = visit_Assign

    def visit_Call(self, node: ast.Call) -> None:
        function = node.func
        is_re = (
            isinstance(function, ast.Attribute)
            and isinstance(function.value, ast.Name)
            and function.value.id == "re"
            and function.attr in RE_FUNCTIONS
        )
        if (is_re or (isinstance(function, ast.Name) and function.id in self.takers)) and (
            node.args
        ):
            pattern = self._text(node.args[0])
            scope = "::".join(filter(None, self.scope)) or "<module>"
            self.found[f"{scope} {_digest(pattern)}"] = str(pattern)
        self.generic_visit(node)

    def _scoped(self, name: str, *nodes: ast.AST) -> None:
        self.scope.append(name)
        for node in nodes:
            self.visit(node)
        self.scope.pop()

    def _text(self, node: ast.expr) -> str | bytes:
        """The pattern's text: the literal, the value built from the module's constants,
        or else (built from local values at run time) its source."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
            return node.value
        expression = compile(ast.Expression(node), self.path, "eval")
        try:  # the product's own constant expressions, in its module
            value = eval(expression, dict(self.namespace))
        except Exception:  # a local name: the source is the identity
            return f"<built at run time> {ast.unparse(node)}"
        return value.pattern if hasattr(value, "pattern") else value


def product_regexes() -> dict[tuple[str, str], str]:
    """(file, "scope digest") -> pattern text, for every regex call of the product."""
    found: dict[tuple[str, str], str] = {}
    for package in PACKAGES:
        for file in sorted((ROOT / package).rglob("*.py")):
            path = file.relative_to(ROOT).as_posix()
            tree = ast.parse(file.read_text(), path)
            _imports_plain_re(tree, path)
            module = ".".join(file.relative_to(ROOT).with_suffix("").parts)
            namespace = vars(importlib.import_module(module)) if "re" in _names(tree) else {}
            finder = _Finder(path, namespace)
            finder.visit(tree)
            found |= {(path, key): pattern for key, pattern in finder.found.items()}
    return found


def _names(tree: ast.Module) -> set[str]:
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}


def _imports_plain_re(tree: ast.Module, path: str) -> None:
    """The walk finds ``re.<function>`` calls: another spelling would hide a pattern."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("re", "regex"):
            raise AssertionError(f"{path}: write `import re` and `re.{node.names[0].name}`")
        if isinstance(node, ast.Import):
            for alias in node.names:
                assert alias.name != "regex", f"{path}: the regex package is not reviewed here"
                assert alias.name != "re" or alias.asname is None, f"{path}: `import re` only"


# the notes' words: "at a space run's start": the pattern begins with "(?<!\s)", so a run
# of whitespace is tried once, where it starts, not again from each of its characters;
# "possessive": "*+", "++", nothing given back, so nothing retried
RULE = "starts at I/my/we; each space run ends at a word; clauses <= 1,000 characters"
# file -> "scope digest" (the name assigned, or the function, class::method or @rule it
# is in; the digest of its text) -> why it runs in time linear in its text
REVIEWED: dict[str, dict[str, str]] = {
    "console/templatetags/console_text.py": {
        "highlight 2085f67978": "escaped literal terms, then \\w*; query <= 500 chars",
        "query_terms ef8a3a0a77": "one class, one way",
    },
    "ingestion/loaders/detect.py": {
        "_CONTROL 8f97eb7a90": "one character class",
        "_HTML_STRONG 5a09c48c23": "anchored; one '<!--.*-->' (was a star of lazy ones: 2^n)",
        "_HTML_TAG eaae1bf6a5": "searched up to the last '>' only (_html_tag_found)",
    },
    "ingestion/loaders/markup.py": {
        "_ATX_HEADING 06baff9ad2": "closing '#'s tried after a non-space only (was n²)",
        "_FENCE 9133fe7bdf": "anchored, bounded prefix",
        "_IDENTIFIER b3c8aae182": "anchored, one class per position",
        "_OPENS d6ad20db20": "match at the start, two characters",
    },
    "ingestion/loaders/office.py": {
        "_BLANK_LINES 03647bc685": "one run of one character",
        "_HEADING_STYLE c4d9038179": "anchored literal and one digit",
    },
    "memories/api/pagination.py": {
        "BASE64URL c17b6f0513": "fullmatch of one class; cursor length checked first",
    },
    "memories/api/parsers.py": {
        "STRING 44817edb1d": "possessive: every quote starts at most one match",
        "SUSPECT 862cc4fe8c": "literal prefixes, fixed length",
        "TOKEN c0098d16ec": "STRING or one character",
    },
    "memories/providers/embeddings.py": {
        "HashingEmbeddingProvider::embed ef8a3a0a77": "one class, one way",
    },
    "memories/providers/onnx_export.py": {
        "_int8_quantize_steps e3bbfd7564": "PER_BLOCK patterns over the graph's node names",
    },
    "memories/providers/request_ids.py": {
        "SANE 46cab41820": "bounded: at most 128 characters",
    },
    "memories/services/context/sources.py": {
        "Candidate::norm a810f32b5f": "one class, one way",
        "_body e78c9d49c4": "anchored at ^ (sub tries other positions in O(1)); [^:]{0,80} bounded",
    },
    "memories/services/search/time_range.py": {
        # a query's first 2,000 characters; each pattern also in tests/test_text_linear.py
        "PATTERNS a54b0d6165": "starts at a word boundary; bounded words and digits, \\s+ between",
        "PATTERNS a063c7c905": "starts at a word boundary; a month's name, \\s+, four digits",
        "PATTERNS 969ac508b2": "starts at a word boundary; a preposition, \\s+, four digits",
        "PATTERNS a800c7ecc1": "starts at a word boundary; a preposition, \\s+, a month's name",
        "PATTERNS 3118c6ea1b": "starts at a word boundary; fixed words and \\d{1,3}",
    },
    "memories/services/working_store.py": {
        "_INDEX_KEY af141ccc24": "Redis key names the hub writes; anchored",
    },
    "synopsis/extraction.py": {
        "FENCE 7f14e99ea5": "anchored; greedy body, one pass back (was lazy: n²)",
        "_evidence 656fd45a68": "one class, one way",
    },
    "synopsis/extraction_drafts.py": {
        "LIST_SEPARATOR 1679f617df": "at a space run's start; possessive (was n²)",
        "due_date 4bede46a06": "starts at a marker word; fixed-length dates; clause <= 1,000 chars",
        "due_date 8f4bc24e04": "starts at a marker word; fixed-length dates; clause <= 1,000 chars",
        "due_date b233040b3e": "starts at a marker word; fixed-length dates; clause <= 1,000 chars",
        "normalize 45cd4857c3": "anchored; a word then a run",
        "person_name 8f19ddc21b": "one character per position",
        "tail a8612705ab": "literal words between \\b",
        "tail b76caa8c5f": "literal words between \\b",
        "tail fae02122cc": "literal words between \\b",
    },
    "synopsis/extraction_lexicon.py": {
        "ABBREVIATION 56e873132f": "literal words anchored at $",
        "CLAUSE_BREAK 7d235092d9": "at a space run's start; possessive, one way (was n³)",
        "COMMA e60d95b414": "at a space run's start; possessive (was n²)",
        "FIRST_PERSON 502902886d": "literal words between \\b",
        "HEDGE 5b298b7e78": "starts at a word; literal words",
        "LIST 5c99f4b7b6": "each comma item taken whole, one way; items <= 40 chars (was 2^items)",
        "NOT_ASSERTED e594cd7d96": "at a space run's start ('said': 2nd space); possessive",
        "NOT_GOALS 387ae47b9b": "anchored literal words",
        "NOT_LIKES 23b93e464d": "starts at 'to'; literal words",
        "OBJECT_END 56c381a6c1": "at a space run's start; possessive",
        "QUESTION d1b3dd4f5e": "anchored: \\W* then literal words",
        "QUOTE_OPENING f30c751012": "one character (quotations closed by str.index, not a pattern)",
        "SENTENCE_BREAK 5614410ecd": "after .!? or at a space run's start (was n²)",
        "TRAILING 315ef24681": "at a space run's start; anchored at $",
        "TRAILING_TIME 1446af3020": "at a space run's start; anchored at $",
    },
    "synopsis/extraction_offline.py": {
        "_prefix_allowed 4eb4326282": "one class, one way",
    },
    "synopsis/extraction_rules.py": {
        "@rule _age 17e8d41dd6": RULE,
        "@rule _age 7b2fa8b3a4": RULE,
        "@rule _allergy d4bfdeb18c": RULE,
        "@rule _allergy e816988a8e": RULE,
        "@rule _allergy_named 8ef9e8fc26": RULE,
        "@rule _birthday b31b990060": RULE,
        "@rule _birthplace 98f6dbfc26": RULE,
        "@rule _called 2d1e79aaa3": RULE,
        "@rule _called d38923a250": RULE,
        "@rule _condition 297dbd66c8": RULE,
        "@rule _condition d25d2c5658": RULE,
        "@rule _diet 7d225d5d25": RULE,
        "@rule _employer 0785b9ef74": RULE,
        "@rule _employer a82bd5542c": RULE,
        "@rule _favorite a71c217085": RULE,
        "@rule _goal 3a3031fc5a": RULE,
        "@rule _goal 4315b76c73": RULE,
        "@rule _home d28ff373ca": RULE,
        "@rule _intolerance c6173f4800": RULE,
        "@rule _job 94207155f1": RULE,
        "@rule _languages cf9749921f": RULE,
        "@rule _likes 290915dd4c": RULE,
        "@rule _marital ba382b25a2": RULE,
        "@rule _moved 2fbe6dbf08": RULE,
        "@rule _my_name d42e7a9c82": RULE,
        "@rule _my_relative f44505feff": RULE,
        "@rule _origin ebe0d50517": RULE,
        "@rule _pet 46eb7f1852": RULE,
        "@rule _pet efaffce073": RULE,
        "@rule _relatives efff2672c4": RULE,
        "@rule _self_employed 7a0f91c189": RULE,
        "@rule _spouse 1660bbd961": RULE,
        "_likes 5a5213c0ca": "anchored or literal; on a match's text",
        "_likes 68f601f04b": "anchored or literal; on a match's text",
        "rule::register e3bbfd7564": "compiles the @rule patterns, each reviewed above",
    },
    "synopsis/services/fact_consolidation.py": {
        "normalized a810f32b5f": "one class, one way",
    },
    "synopsis/services/facts.py": {
        "_without_hub_text e3bbfd7564": "escaped words joined by \\s+: one way; per held line",
    },
    "synopsis/services/synopsis_material.py": {
        "name_from 280892b65c": "starts at 'name is'; a fact's own text (the hub's)",
    },
    "synopsis/summarizers.py": {
        "HEADER fdbd2621b6": "anchored; the hub's own summary header",
        "LINE 90282125f7": "anchored; [^:]+ then ': ' backtracks once per line",
        "SENTENCE_BREAK 379daa9b4b": "after .!? or at a space run's start; possessive",
        "_informativeness 36fa620cd4": "one class, one way",
        "_sentences 84a1312a8a": "one character",
        "text_fit 6f923a3c1c": "one character and a lookahead",
    },
    "synopsis/synopsis_writers.py": {
        "SUBJECT ec6bdbaaa0": "anchored; words then one run",
    },
}


def test_every_regular_expression_of_the_product_is_reviewed():
    found = product_regexes()
    reviewed = {(file, key) for file, notes in REVIEWED.items() for key in notes}
    new = {key: pattern for key, pattern in found.items() if key not in reviewed}
    gone = sorted(reviewed - set(found))
    lines = [
        f"    in {file!r}: {key!r}: 'why it is linear',  # {pattern[:150]!r}"
        for (file, key), pattern in new.items()
    ]
    assert not new, (
        f"{len(new)} new or changed regular expression(s)."
        + HOW_TO.format(file=Path(__file__).relative_to(ROOT))
        + "\n".join(lines)
    )
    assert not gone, "REVIEWED lists patterns the product no longer has: remove\n" + "\n".join(
        f"    {key!r}" for key in gone
    )


def test_the_inventory_finds_a_pattern_however_it_is_built():
    tree = ast.parse(
        "import re\nWORD = r'\\w+'\nA = re.compile(WORD + 's')\n"
        "def f(text, local):\n    re.sub(local + 'x', '', text)\n    re.findall(r'\\d', text)\n"
        "@rule(WORD)\ndef g(m, clause): ...\n"
    )
    finder = _Finder("synopsis/extraction_rules.py", {"WORD": r"\w+"})
    finder.visit(tree)
    assert sorted(finder.found.values()) == sorted(
        ["\\w+s", "<built at run time> local + 'x'", "\\d", "\\w+"]
    )
    assert {key.split()[0] for key in finder.found} == {"A", "f", "@rule"}
    assert "@rule g " + _digest("\\w+") in finder.found
