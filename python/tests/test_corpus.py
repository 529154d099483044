"""The shared cross-language corpus (protocol/corpus), byte for byte."""
import hashlib
import json
import re

import pytest

import onceonly
from onceonly import InvalidKey, InvalidPayload, Payload
from conftest import REPO

PAYLOADS = json.loads((REPO / "protocol/corpus/payloads.json").read_text("utf-8"))
KEYS = json.loads((REPO / "protocol/corpus/keys.json").read_text("utf-8"))


@pytest.mark.parametrize("case", PAYLOADS["cases"], ids=[c["name"] for c in PAYLOADS["cases"]])
def test_canonical_json_and_fingerprint_match_the_rust_core(case):
    p = Payload.parse(case["input"])
    assert p.json == case["canonical"]
    assert p.fingerprint == case["fingerprint"]
    # A Python value read from the same text encodes the same way.
    assert Payload.of(onceonly.canonical.parse_json(case["input"])) == p


@pytest.mark.parametrize("case", PAYLOADS["refused"], ids=[c["name"] for c in PAYLOADS["refused"]])
def test_a_key_named_twice_is_refused_naming_it(case):
    said = f"duplicate key {json.dumps(case['key'], ensure_ascii=False)} in the object at {case['object']}"
    with pytest.raises(InvalidPayload, match=re.escape(said)):
        Payload.parse(case["input"])


def test_no_payload_fingerprints_the_empty_string():
    assert Payload.none() == Payload(PAYLOADS["none"]["canonical"], PAYLOADS["none"]["fingerprint"])
    assert PAYLOADS["none"]["fingerprint"] == hashlib.sha256(b"").hexdigest()


def test_celery_arguments_fingerprint_as_the_corpus_says():
    case = next(c for c in PAYLOADS["cases"] if c["name"] == "celery-style args")
    value = {"kwargs": {"retry": False}, "args": (42, "user@example.com")}  # a tuple, as Celery passes args
    assert Payload.of(value).fingerprint == case["fingerprint"]


@pytest.mark.parametrize("job", KEYS["job_types"]["valid"])
def test_job_types_accepted(job):
    onceonly.validate_job_type(job)


@pytest.mark.parametrize("job", KEYS["job_types"]["invalid"])
def test_job_types_refused(job):
    with pytest.raises(InvalidKey):
        onceonly.validate_job_type(job)


@pytest.mark.parametrize("key", KEYS["op_keys"]["valid"])
def test_keys_accepted(key):
    onceonly.validate_op_key(key)


@pytest.mark.parametrize("key", KEYS["op_keys"]["invalid"])
def test_keys_refused(key):
    with pytest.raises(InvalidKey):
        onceonly.validate_op_key(key)


@pytest.mark.parametrize("case", KEYS["idempotency_keys"])
def test_idempotency_keys(case):
    assert onceonly.idempotency_key(case["job_type"], case["op_key"]) == case["idempotency_key"]


@pytest.mark.parametrize("bad, words", [
    ("{not json", "not valid JSON"),
    ("NaN", "NaN"),
    ('"\\ud800"', "lone surrogate"),
])
def test_bad_payload_text_names_the_problem(bad, words):
    with pytest.raises(InvalidPayload, match=words):
        Payload.parse(bad)


@pytest.mark.parametrize("value, words", [
    ({1: "a"}, "non-string object key"),
    ({"a": {1, 2}}, "set at \\$.a"),
    (float("inf"), "infinity"),
    (10**400, "too large"),
])
def test_bad_payload_values_name_the_problem(value, words):
    with pytest.raises(InvalidPayload, match=words):
        Payload.of(value)


DB_URLS = json.loads((REPO / "protocol/corpus/db_urls.json").read_text("utf-8"))


@pytest.mark.parametrize("case", DB_URLS["cases"], ids=[c["name"] for c in DB_URLS["cases"]])
def test_database_urls_are_shown_as_the_corpus_says(case):
    assert onceonly.errors.redact(case["url"]) == case["shown"]
