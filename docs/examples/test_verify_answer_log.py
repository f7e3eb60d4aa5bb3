"""The independent verifier (verify_answer_log.py) against pacerelle-core/tests/vectors/signature.json: the
export verifies (exit 0) and every tampered copy fails (exit 1) naming the record and step the vectors name.
Run by `cargo xtask test` (step `py`) with `cryptography` installed in the step's venv."""
import importlib.util
import json
import pathlib
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
SCRIPT = HERE / "verify_answer_log.py"
VECTORS = HERE.parent.parent / "pacerelle-core" / "tests" / "vectors" / "signature.json"
CASES = json.loads(VECTORS.read_text(encoding="utf-8"))["cases"]


def of_type(kind):
    return [pytest.param(c, id=c["name"]) for c in CASES if c["type"] == kind]


def run(export, tmp_path):
    path = tmp_path / "export.json"
    path.write_text(json.dumps(export, ensure_ascii=False), encoding="utf-8")
    return subprocess.run([sys.executable, str(SCRIPT), str(path)], capture_output=True, text=True, timeout=60)


def verifier():
    spec = importlib.util.spec_from_file_location("verify_answer_log", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("case", of_type("export"))
def test_the_export_verifies(case, tmp_path):
    done = run(case["export"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{case['records']} records verify"


@pytest.mark.parametrize("case", of_type("rejectExport"))
def test_a_tampered_export_fails_at_its_record_and_step(case, tmp_path):
    done = run(case["export"], tmp_path)
    # 1: a record does not verify; 2: the header is not a version 1 export's, nothing was checked.
    assert done.returncode == (1 if case["index"] > 0 else 2), (done.stdout, done.stderr)
    line = done.stderr.strip()
    assert line.startswith(f"record {case['index']}"), line
    assert f"step {case['step']}:" in line, line
    if case["index"] > 0:
        assert f"(question {case['questionId']})" in line, line


def test_there_are_tampered_copies_of_every_kind():
    names = " ".join(c["name"] for c in CASES if c["type"] == "rejectExport")
    for what in ("answer", "question text", "time", "device key", "approved", "signature removed"):
        assert what in names, what


@pytest.mark.parametrize("case", of_type("signedAnswer"))
def test_the_signed_bytes_are_the_vectors(case):
    module = verifier()
    record = {k: case[k] for k in ("deviceId", "questionId", "questionDigest", "answer")}
    message = module.signed_bytes(case["agentId"], record, module.when(case["answeredAt"]))
    assert message.hex() == case["signedBytesHex"]


@pytest.mark.parametrize("case", of_type("signingKey"))
def test_the_fingerprints_are_the_vectors(case):
    module = verifier()
    assert module.fingerprint(module.b64url(case["publicKey"])) == case["fingerprint"]


def test_a_file_that_is_not_an_export_exits_2(tmp_path):
    done = run({"v": 1, "format": "pacerelle-answer-log"}, tmp_path)
    assert done.returncode == 2, done.stderr
