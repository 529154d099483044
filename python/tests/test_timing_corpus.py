"""protocol/corpus/timing.json: a refused start reads the same in every client."""
import json
from pathlib import Path

import pytest

import onceonly
from onceonly.spec import JobSpec, timing_lines, to_ms

CORPUS = json.loads((Path(__file__).resolve().parents[2] / "protocol/corpus/timing.json").read_text("utf-8"))
CASES = [c for c in CORPUS["cases"] if "python" in c["clients"]]


def spec_of(inp):
    ms = lambda name: to_ms(inp[name], name) if name in inp else None  # noqa: E731
    return JobSpec(job_type=inp["job"], lease_ms=ms("lease"), timeout_ms=ms("timeout"), heartbeat_ms=ms("heartbeat"),
                   redelivery_timeout_ms=ms("redelivery_timeout"), lock_lifetime_ms=ms("lock_lifetime"),
                   max_retry_delay_ms=ms("max_retry_delay"),
                   redelivery_setting=inp.get("redelivery_setting", "redelivery_timeout"))


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_refusals_read_as_the_corpus_says(case):
    spec = spec_of(case["input"])
    assert timing_lines(spec.job_type, spec.broken_timing_rules()) == case["rules"]
    if case["refused"] is None:
        spec.validate()
    else:
        with pytest.raises(onceonly.TimingError) as refused:
            spec.validate()
        assert str(refused.value) == case["refused"]


def test_the_corpus_keeps_its_cases():
    print(f"timing corpus: {len(CASES)} of {len(CORPUS['cases'])} cases run by Python")
    assert len(CASES) >= 14
