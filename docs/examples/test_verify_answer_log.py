"""The independent verifier (verify_answer_log.py) against pacerelle-core/tests/vectors/signature.json: the
export verifies (exit 0) and every tampered copy fails (exit 1) naming the record (or the grant and its use) and
the step the vectors name; the signed bytes of answers and grants are the vectors', and every refused grant is
refused at the step of its refusal.
Run by `cargo xtask test` (step `py`) with `cryptography` installed in the step's venv."""
import base64
import copy
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


def run(export, tmp_path, text=None):
    """The verifier on `export` written as JSON, or on `text` as it is (a member name given twice)."""
    path = tmp_path / "export.json"
    path.write_text(json.dumps(export, ensure_ascii=False) if text is None else text, encoding="utf-8")
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
    done = run(case.get("export"), tmp_path, case.get("exportText"))
    # 2: not a version 1 export of the shape of §4.9 (step shape or 0), nothing was checked; 1: a failure found by
    # checking (a device listed twice, step 0a, or a record).
    unchecked = str(case["step"]) in ("shape", "0")
    assert done.returncode == (2 if unchecked else 1), (done.stdout, done.stderr)
    line = done.stderr.strip()
    if case.get("grant"):
        use = f", use {case['use']}" if case.get("use") else ""
        assert line.startswith(f"grant {case['grant']} (question {case['questionId']}){use}: "), line
    else:
        assert line.startswith(f"record {case['index']}"), line
    assert f"step {case['step']}:" in line, line
    if case["index"] > 0:
        assert f"(question {case['questionId']})" in line, line
    if case.get("deviceId"):
        assert line.endswith(f": {case['deviceId']}"), line


def test_there_are_tampered_copies_of_every_kind():
    names = " ".join(c["name"] for c in CASES if c["type"] == "rejectExport")
    for what in ("answer", "question text", "time", "device key", "approved", "signature removed", "devices:",
                 "given twice", "shape:", "leap second", "v written 1.0", "a yes with a value"):
        assert what in names, what
    steps = {c["step"] for c in CASES if c["type"] == "rejectExport"}
    assert {"shape", "0", "0a"} <= steps, steps
    assert {str(n) for n in range(1, 15)} <= steps, steps
    assert {f"g{n}" for n in range(1, 12)} | {f"u{n}" for n in range(1, 5)} <= steps, steps


def test_times_written_otherwise_verify_as_the_instant_they_name():
    names = " ".join(c["name"] for c in CASES if c["type"] == "export")
    for what in ("lower-case t and z", "two fractional digits", "no fractional digits", "truncated", "-00:00",
                 "+01:00", "value null"):
        assert what in names, what


@pytest.mark.parametrize("case", of_type("signedAnswer"))
def test_the_signed_bytes_are_the_vectors(case):
    module = verifier()
    record = {k: case[k] for k in ("deviceId", "questionId", "questionDigest", "answer")}
    message = module.signed_bytes(case["agentId"], record, module.when(case["answeredAt"]))
    assert message.hex() == case["signedBytesHex"]


def grant_of(case):
    return {"id": case["questionId"], "deviceId": case["deviceId"], "grantedAt": case["grantedAt"], "grant": case["grant"]}


@pytest.mark.parametrize("case", of_type("signedGrant"))
def test_the_grant_bytes_are_the_vectors_and_the_grant_checks(case):
    module = verifier()
    g = grant_of(case)
    message = module.grant_bytes(case["agentId"], g, case["questionDigest"], module.when(case["grantedAt"]),
                                 module.when(case["grant"]["expiresAt"]))
    assert message.hex() == case["signedBytesHex"]
    module.check_grant(case["agentId"], g, case["questionDigest"], case["offer"], module.b64url(case["publicKey"]))


REFUSAL_STEPS = {"not_offered": "g7", "scope_not_offered": "g8", "other_policy": "g9", "too_long": "g10",
                 "no_key": "g11", "bad_signature": "g11"}


@pytest.mark.parametrize("case", of_type("rejectGrant"))
def test_a_refused_grant_fails_at_the_step_of_its_refusal(case):
    module = verifier()
    key = module.b64url(case["publicKey"]) if case["publicKey"] else None
    with pytest.raises(module.Fail, match=f"^step {REFUSAL_STEPS[case['refusal']]}:"):
        module.check_grant(case["agentId"], grant_of(case), case["questionDigest"], case["offer"], key)


def test_every_refusal_of_a_grant_has_a_case():
    assert {c["refusal"] for c in CASES if c["type"] == "rejectGrant"} == set(REFUSAL_STEPS)


@pytest.mark.parametrize("case", of_type("signingKey"))
def test_the_fingerprints_are_the_vectors(case):
    module = verifier()
    assert module.fingerprint(module.b64url(case["publicKey"])) == case["fingerprint"]


def test_a_file_that_is_not_an_export_exits_2(tmp_path):
    done = run({"v": 1, "format": "pacerelle-answer-log"}, tmp_path)
    assert done.returncode == 2, done.stderr


def b64(raw):
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def test_a_key_of_ones_own_listed_before_the_genuine_entry_is_refused(tmp_path):
    """The forgery: every record signed again with a key of one's own (the no turned into a yes), and for each
    answering device an entry with that key and its fingerprint placed before the genuine entry, which stays
    second with the fingerprint the phone shows. Taking the first entry of a device would accept it."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    module = verifier()
    export = copy.deepcopy(next(c for c in CASES if c["type"] == "export")["export"])
    own = Ed25519PrivateKey.generate()
    public = b64(own.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))
    for record in export["records"]:
        if record["answer"] == {"type": "no"}:
            record["answer"], record["approved"] = {"type": "yes"}, True
        at = module.when(record["answeredAt"])
        record["signature"] = b64(own.sign(module.signed_bytes(export["agentId"], record, at)))
        record["signingKey"] = public
        for approval in record.get("approvals", []):  # a question's several approvals too
            yes = dict(record, deviceId=approval["deviceId"], answer={"type": "yes"})
            approval["signature"] = b64(own.sign(module.signed_bytes(export["agentId"], yes,
                                                                     module.when(approval["answeredAt"]))))
    for g in export.get("grants", []):  # the grants too, signed with the same key
        digest = next(r["questionDigest"] for r in export["records"] if r["questionId"] == g["id"])
        message = module.grant_bytes(export["agentId"], g, digest, module.when(g["grantedAt"]),
                                     module.when(g["grant"]["expiresAt"]))
        g["grant"]["signature"] = b64(own.sign(message))
    answering = []
    for record in export["records"]:
        for device in [record["deviceId"]] + [a["deviceId"] for a in record.get("approvals", [])]:
            if device not in answering:
                answering.append(device)
    genuine = [d for d in export["devices"] if d["deviceId"] in answering]
    forged = [dict(d, signingKey=public, fingerprint=module.fingerprint(base64.urlsafe_b64decode(public + "=")))
              for d in genuine]
    export["devices"] = forged + export["devices"]
    done = run(export, tmp_path)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stderr.strip() == f"record 0: step 0a: the export lists a device twice in devices: {answering[0]}"
    # Listed once, with the forged key only, it verifies: what gives it away then is the fingerprint the
    # person compares with the phone's (§4.9).
    export["devices"] = forged + [d for d in export["devices"][len(forged):] if d["deviceId"] not in answering]
    assert run(export, tmp_path).returncode == 0


def test_json_is_read_as_section_5_says():
    module = verifier()
    assert module.strict_json(b'{"a":{"b":[{"c":1}]},"d":null}') == {"a": {"b": [{"c": 1}]}, "d": None}
    for text in [b'{"a":1,"a":1}', b'{"a":{"b":1,"b":2}}', b'{"a":[{"b":1,"b":2}]}', b'{"a":"\\ud800"}',
                 b'{"a":1e400}', b'\xef\xbb\xbf{}', b'{"a":NaN}', b'{"a":Infinity}', b'{"a":"\xff"}',
                 b"[" * 128 + b"]" * 128]:
        with pytest.raises(ValueError):
            module.strict_json(text)
    assert module.strict_json(b"[" * 127 + b"]" * 127) is not None
    assert isinstance(module.strict_json(b"-0"), float)


@pytest.mark.parametrize("text, wire", [
    ("2026-11-30T00:10:00.250Z", "2026-11-30T00:10:00.250Z"),
    ("2026-11-30t00:10:00.250z", "2026-11-30T00:10:00.250Z"),
    ("2026-11-30T00:10:00.25Z", "2026-11-30T00:10:00.250Z"),
    ("2026-11-30T00:10:00Z", "2026-11-30T00:10:00.000Z"),
    ("2026-11-30T00:10:00.2509999999999Z", "2026-11-30T00:10:00.250Z"),
    ("2026-11-30T00:10:00.250-00:00", "2026-11-30T00:10:00.250Z"),
    ("2026-11-30T01:10:00.250+01:00", "2026-11-30T00:10:00.250Z"),
    ("2026-11-30T00:10:00.250+23:59", "2026-11-29T00:11:00.250Z"),
    ("2028-02-29T12:00:00.000Z", "2028-02-29T12:00:00.000Z"),
    ("1969-12-31T23:59:59.9995Z", "1969-12-31T23:59:59.999Z"),
    ("0000-01-01T00:00:00.000Z", "0000-01-01T00:00:00.000Z"),
    ("9999-12-31T23:59:59.999Z", "9999-12-31T23:59:59.999Z"),
    ("2026-12-31T23:59:60.000Z", None),
    ("2026-11-30 00:10:00.250Z", None),
    ("2026-11-30T00:10:00.250", None),
    ("2026-11-30T00:10:00.250+0100", None),
    ("2026-11-30T00:10:00.250+24:00", None),
    ("2026-11-30T00:10:00.Z", None),
    ("2026-02-30T00:10:00.250Z", None),
    ("2026-11-30T24:00:00.000Z", None),
    ("9999-12-31T23:59:59.999-23:59", None),
    ("0000-01-01T00:00:00+23:59", None),
    ("2026-11-30T00:10:00.\uff1250Z", None),
    (" 2026-11-30T00:10:00.250Z", None),
])
def test_times_are_read_as_section_0_says(text, wire):
    module = verifier()
    t = module.when(text)
    assert (None if t is None else module.wire(t)) == wire
