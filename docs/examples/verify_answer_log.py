#!/usr/bin/env python3
"""Verify a Pacerelle answer-log export, independently of Pacerelle (docs/crypto.md §4.8 and §4.9).

    python3 verify_answer_log.py EXPORT.json     (Python 3.11 or newer; pip install cryptography)

Exit 0 when every record verifies; 1 naming the first record that does not ("record N (question ID): step S:
why"); 2 when the file is not a version 1 export (step 0: nothing was checked).
"""
import base64, binascii, hashlib, json, struct, sys
from datetime import datetime, timezone
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

class Fail(Exception):
    pass

def b64url(text):  # strict (§0): no padding, no + or /, canonical; None when it is not
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError, TypeError):
        return None
    return raw if base64.urlsafe_b64encode(raw).rstrip(b"=").decode() == text else None

def when(text):  # RFC 3339, any offset, to UTC with millisecond precision
    t = datetime.fromisoformat(text).astimezone(timezone.utc)
    return t.replace(microsecond=t.microsecond // 1000 * 1000)

def wire(t):  # YYYY-MM-DDTHH:MM:SS.mmmZ
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"

def fingerprint(key):  # the first 12 bytes of SHA-256(key), lower-case hex, six groups of four
    digest = hashlib.sha256(key).hexdigest()[:24]
    return " ".join(digest[i:i + 4] for i in range(0, 24, 4))

def field(text):
    data = text.encode("utf-8")
    return struct.pack(">I", len(data)) + data

def signed_bytes(agent_id, r, answered_at):
    kind, value = r["answer"]["type"], r["answer"].get("value")
    values = {"yes": [], "no": [], "options": value, "text": [value]}[kind]
    head = [agent_id, r["deviceId"], r["questionId"], r["questionDigest"], wire(answered_at), kind]
    return (b"pacerelle/v1/answer-signature\x01" + b"".join(field(t) for t in head)
            + struct.pack(">I", len(values)) + b"".join(field(v) for v in values))

def fits(q, answer):
    kind, value = answer["type"], answer.get("value")
    if q["kind"] == "yes_no":
        return kind in ("yes", "no")
    if q["kind"] == "choice" and kind == "options":
        return (len(value) > 0 and len(set(value)) == len(value) and (q.get("multiple", False) or len(value) == 1)
                and all(v in q.get("options", []) for v in value))
    return q["kind"] == "text" and kind == "text" and isinstance(value, str)

def check(step, ok, why):
    if not ok:
        raise Fail(f"step {step}: {why}")

def verify_record(export, r):
    raw = b64url(r["question"])
    check(1, raw is not None, "the question is not strict base64url")
    check(2, base64.urlsafe_b64encode(hashlib.sha256(raw).digest()).rstrip(b"=").decode() == r["questionDigest"],
          "questionDigest is not the SHA-256 of the question's bytes")
    try:
        q = json.loads(raw.decode("utf-8"))
        expires_at, shaped = when(q["expiresAt"]), isinstance(q["question"], str)
    except (ValueError, KeyError, TypeError, AttributeError):
        shaped = False
    check(3, shaped and q["kind"] in ("yes_no", "choice", "text"), "the question's bytes are not a question")
    answered_at = when(r["answeredAt"])
    check(4, r["deviceId"] in q.get("recipients", []), "the device is not one the question was sent to")
    check(5, answered_at < expires_at, "the answer is dated at or after the question's expiry")
    check(6, fits(q, r["answer"]), "the answer does not fit the question")
    check(7, r["approved"] is (r["answer"]["type"] in ("yes", "options")), "approved does not follow from the answer")
    device = next((d for d in export["devices"] if d["deviceId"] == r["deviceId"]), None)
    check(8, device is not None, "the answering device is not among the devices")
    check(9, device.get("signingKey") is not None, "the answering device has no signing key")
    check(10, r.get("signingKey") == device["signingKey"], "the record's signing key is not the device's")
    key = b64url(device["signingKey"])
    check(11, key is not None and len(key) == 32, "the signing key is not 32 bytes of base64url")
    check(12, device.get("fingerprint") in (None, fingerprint(key)), "the fingerprint is not the key's")
    check(13, r.get("signature") is not None, "the answer is not signed")
    signature = b64url(r["signature"])
    try:
        Ed25519PublicKey.from_public_bytes(key).verify(signature or b"", signed_bytes(export["agentId"], r, answered_at))
    except (InvalidSignature, ValueError):
        raise Fail("step 14: the signature does not verify")

def main(path):
    try:
        with open(path, encoding="utf-8") as f:
            export = json.load(f)
        if export.get("v") != 1 or export.get("format") != "pacerelle-answer-log":
            print("record 0: step 0: not a version 1 answer-log export", file=sys.stderr)
            return 2
        for n, r in enumerate(export["records"], start=1):
            try:
                verify_record(export, r)
            except Fail as failure:
                print(f"record {n} (question {r['questionId']}): {failure}", file=sys.stderr)
                return 1
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        print(f"{path}: not an answer-log export ({type(e).__name__}: {e})", file=sys.stderr)
        return 2
    count = len(export["records"])
    print(f"{count} record{'' if count == 1 else 's'} verif{'ies' if count == 1 else 'y'}")
    return 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1]) if len(sys.argv) == 2 else 2)
