#!/usr/bin/env python3
"""Verify a Pacerelle answer-log export, independently of Pacerelle (docs/crypto.md §4.8, §4.8b and §4.9).

    python3 verify_answer_log.py EXPORT.json     (Python 3.11 or newer; pip install cryptography)

Exit 0 when every record and every grant verifies; 1 naming the first failure found by checking ("record N
(question ID): step S: why", "grant N (question ID)[, use M]: step S: why", or "record 0: step 0a: …" for a
device listed twice); 2 when the file cannot be read or is not a version 1 export of the shape of §4.9 (step
shape or 0: nothing was checked).
"""
import base64, binascii, hashlib, json, math, re, struct, sys
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

class Fail(Exception):
    pass

class NotAnExport(Exception):
    pass

# ---- JSON as §5 reads it: RFC 8259, no member name twice in one object (at any depth), no lone surrogate,
# no NaN or Infinity, no number beyond a double, at most 127 nested levels. Python's json alone would take the
# last of two members and read NaN.

def _pairs(pairs):
    names = [name for name, _ in pairs]
    if len(set(names)) != len(names):
        raise ValueError("a member name given twice")
    return dict(pairs)

def _finite(text):
    if not math.isfinite(float(text)):
        raise ValueError("a number beyond a double")
    return text

def _walk(value, depth=0):  # strings (and member names) are Unicode text; at most 127 nested arrays and objects
    if isinstance(value, str):
        value.encode("utf-8")  # a lone surrogate does not encode
    elif isinstance(value, (list, dict)):
        if depth == 127:
            raise ValueError("nested more than 127 levels")
        for v in value if isinstance(value, list) else [x for pair in value.items() for x in pair]:
            _walk(v, depth + 1)

def strict_json(raw):  # bytes → value; ValueError when §5 refuses them
    def number(text):  # -0 is not an integer here (a JSON reader on doubles reads it as -0.0)
        _finite(text)
        return float(text) if text.startswith("-0") and int(text) == 0 else int(text)
    def constant(name):
        raise ValueError(f"{name} is not JSON")
    try:
        value = json.loads(raw.decode("utf-8"), object_pairs_hook=_pairs, parse_float=lambda t: float(_finite(t)),
                           parse_int=number, parse_constant=constant)
    except RecursionError:
        raise ValueError("nested too deep")
    _walk(value)
    return value

# ---- Timestamps (§0): RFC 3339 §5.6 date-time, seconds 00 to 59, truncated to the millisecond, years 0000-9999
# in UTC. Computed as integers (Python's datetime has no year 0).

TIME = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?"
                  r"(?:[Zz]|([+-])([0-9]{2}):([0-9]{2}))")
FIRST, LAST = -62_167_219_200_000, 253_402_300_799_999

def days_from_civil(y, m, d):
    y -= m <= 2
    era, yoe = divmod(y, 400)
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    return era * 146097 + (yoe * 365 + yoe // 4 - yoe // 100 + doy) - 719468

def civil_from_days(z):
    era, doe = divmod(z + 719468, 146097)
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d, m = doy - (153 * mp + 2) // 5 + 1, mp + (3 if mp < 10 else -9)
    return yoe + era * 400 + (m <= 2), m, d

def when(text):  # milliseconds since 1970 in UTC, or None
    match = TIME.fullmatch(text) if isinstance(text, str) else None
    if not match:
        return None
    y, mo, d, h, mi, s = (int(g) for g in match.groups()[:6])
    leap = y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)
    days_in = [31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    if not (1 <= mo <= 12 and 1 <= d <= days_in[mo - 1] and h <= 23 and mi <= 59 and s <= 59):
        return None
    offset = 0
    if match.group(8):
        oh, om = int(match.group(9)), int(match.group(10))
        if oh > 23 or om > 59:
            return None
        offset = (1 if match.group(8) == "+" else -1) * (oh * 60 + om) * 60_000
    ms = int((match.group(7) or "0")[:3].ljust(3, "0"))
    t = ((days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * 60_000 + s * 1000 + ms - offset
    return t if FIRST <= t <= LAST else None

def wire(t):  # YYYY-MM-DDTHH:MM:SS.mmmZ
    days, ms = divmod(t, 86_400_000)
    y, m, d = civil_from_days(days)
    return f"{y:04d}-{m:02d}-{d:02d}T{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d}.{ms % 1000:03d}Z"

# ---- The shape of §4.9 ("Shape"): members and their types; unknown members ignored; an optional member may be
# null, which is absent.

def b64url(text):  # strict (§0): no padding, no + or /, canonical; None when it is not
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError, TypeError):
        return None
    return raw if base64.urlsafe_b64encode(raw).rstrip(b"=").decode() == text else None

def is_str(v):
    return isinstance(v, str)

def is_int(v):
    return type(v) is int

def strings(v):
    return isinstance(v, list) and all(is_str(x) for x in v)

def answer_shaped(a):
    if not isinstance(a, dict) or a.get("type") not in ("yes", "no", "options", "text"):
        return False
    value = a.get("value")
    return {"yes": value is None, "no": value is None, "options": strings(value), "text": is_str(value)}[a["type"]]

def members(obj, required, optional):
    return (isinstance(obj, dict) and all(k in obj and check(obj[k]) for k, check in required.items())
            and all(obj.get(k) is None or check(obj[k]) for k, check in optional.items()))

def is_time(v):
    return when(v) is not None

def scope_shaped(s):  # a grant's scope (§4.8b)
    return members(s, {"tool": is_str, "folder": is_str}, {"command": is_str, "match": lambda m: m in ("exact", "prefix")})

def offer_shaped(o):  # a question's grant offer (§4.8b): durations are integers from 0 to 2^64 - 1 (limits unchecked)
    return members(o, {"durations": lambda ds: isinstance(ds, list) and all(is_int(d) and 0 <= d < 2**64 for d in ds),
                       "scopes": lambda ss: isinstance(ss, list) and all(map(scope_shaped, ss)), "policy": is_str}, {})

def grant_shaped(g):  # a grant of the export, with its uses
    use = lambda u: members(u, {"at": is_time, "tool": is_str, "folder": is_str}, {"command": is_str})
    signed = lambda s: members(s, {"scope": scope_shaped, "expiresAt": is_time, "policy": is_str, "signature": is_str}, {})
    return members(g, {"id": is_str, "deviceId": is_str, "grantedAt": is_time, "question": is_str, "grant": signed,
                       "uses": lambda us: isinstance(us, list) and all(map(use, us))}, {})

def approval_shaped(a):  # one signed yes of a question that needs several approvals (§4.7b)
    return members(a, {"deviceId": is_str, "answeredAt": is_time, "signature": is_str}, {})

def shaped(export):
    time = is_time
    device = lambda d: members(d, {"deviceId": is_str, "role": lambda r: r in ("owner", "user"), "addedAt": time},
                               {"name": is_str, "pairedAt": time, "revokedAt": time, "signingKey": is_str,
                                "fingerprint": is_str})
    record = lambda r: members(r, {"questionId": is_str, "question": is_str, "questionDigest": is_str,
                                   "deviceId": is_str, "answer": answer_shaped, "answeredAt": time,
                                   "approved": lambda b: type(b) is bool},
                               {"signature": is_str, "signingKey": is_str,
                                "approvals": lambda a: isinstance(a, list) and all(map(approval_shaped, a))})
    return members(export, {"v": lambda v: is_int(v) and 0 <= v <= 255, "format": is_str, "agentId": is_str,
                            "exportedAt": time, "devices": lambda ds: isinstance(ds, list) and all(map(device, ds)),
                            "records": lambda rs: isinstance(rs, list) and all(map(record, rs))},
                   {"grants": lambda gs: isinstance(gs, list) and all(map(grant_shaped, gs))})

def read_question(raw):  # §4.9 step 3, member by member; None when the bytes are not a question
    try:
        q = strict_json(raw)
    except ValueError:
        return None
    if not isinstance(q, dict):
        return None
    absent = lambda k: k not in q                    # absent is allowed; null is not (these have a default)
    nullable = lambda k, check: q.get(k) is None or check(q[k])
    ok = (is_str(q.get("question")) and q.get("kind") in ("yes_no", "choice", "text") and when(q.get("expiresAt"))
          is not None
          and (absent("options") or strings(q["options"])) and (absent("multiple") or type(q["multiple"]) is bool)
          and (absent("recipients") or strings(q["recipients"]))
          and (absent("channels") or (isinstance(q["channels"], list) and all(c in ("phone", "host") for c in q["channels"])))
          and nullable("details", is_str) and nullable("answerKey", is_str) and nullable("user", is_str)
          and nullable("grants", offer_shaped)
          and (absent("approvals") or (is_int(q["approvals"]) and 1 <= q["approvals"] <= 10)))
    return q if ok else None

# ---- The checks of §4.9.

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
    return q["kind"] == "text" and kind == "text"  # any text, the empty one too

def check(step, ok, why):
    if not ok:
        raise Fail(f"step {step}: {why}")

def verify_record(export, r):
    raw = b64url(r["question"])
    check(1, raw is not None, "the question is not strict base64url")
    check(2, base64.urlsafe_b64encode(hashlib.sha256(raw).digest()).rstrip(b"=").decode() == r["questionDigest"],
          "questionDigest is not the SHA-256 of the question's bytes")
    q = read_question(raw)
    check(3, q is not None, "the question's bytes are not a question")
    answered_at = when(r["answeredAt"])
    check(4, r["deviceId"] in q.get("recipients", []), "the device is not one the question was sent to")
    check(5, answered_at < when(q["expiresAt"]), "the answer is dated at or after the question's expiry")
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
    verify_approvals(export, r, q, answered_at)

def verify_approvals(export, r, q, answered_at):  # steps q1 to q5 (§4.7b)
    needed, approvals = q.get("approvals", 1), r.get("approvals") or []
    if needed == 1 or not r["approved"]:
        check("q5", not approvals, "approvals are listed for a record that needs none")
        return
    devices = [a["deviceId"] for a in approvals]
    check("q2", len(set(devices)) == len(devices), "a device's approval is listed twice")
    check("q1", len(approvals) >= needed, "fewer approvals from distinct devices than the question needs")
    check("q5", any(a["deviceId"] == r["deviceId"] and when(a["answeredAt"]) == answered_at for a in approvals),
          "the record's own answer is not among its approvals")
    for a in approvals:
        at = when(a["answeredAt"])
        d = next((d for d in export["devices"] if d["deviceId"] == a["deviceId"]), None)
        check("q3", d is not None and a["deviceId"] in q.get("recipients", []) and d["role"] == "owner"
              and (d.get("revokedAt") is None or at < when(d["revokedAt"])) and at < when(q["expiresAt"]),
              "an approving device is not a recipient owner, not revoked then, answering in time")
        key = b64url(d.get("signingKey") or "")
        check("q4", key is not None and len(key) == 32, "an approving device has no signing key")
        yes = {"deviceId": a["deviceId"], "questionId": r["questionId"], "questionDigest": r["questionDigest"],
               "answer": {"type": "yes"}}
        try:
            Ed25519PublicKey.from_public_bytes(key).verify(b64url(a["signature"]) or b"",
                                                           signed_bytes(export["agentId"], yes, at))
        except (InvalidSignature, ValueError):
            raise Fail("step q4: an approval's signature does not verify")

# ---- Grants (§4.8b), checked after every record: steps g1 to g11, then each use, u1 to u4.

CONTROL = set(";&|`$()<>\\\n\r")

def inside(path, folder):
    return path == folder or path.startswith(folder.rstrip("/") + "/")

def covers(scope, tool, command, paths, folder):
    if tool != scope["tool"] or folder != scope["folder"]:
        return False
    granted = scope.get("command")
    if granted is None or command is None:
        return granted is None and command is None and all(inside(p, folder) for p in paths)
    if scope.get("match") == "exact":
        return command == granted
    if scope.get("match") == "prefix":
        rest = command[len(granted):]
        return command == granted or (granted != "" and command.startswith(granted) and rest.startswith(" ")
                                      and not CONTROL & set(rest))
    return False

def grant_bytes(agent_id, g, digest, granted_at, expires_at):
    s, scope = g["grant"], g["grant"]["scope"]
    texts = [agent_id, g["deviceId"], g["id"], digest, wire(granted_at), wire(expires_at), s["policy"], scope["tool"],
             scope.get("command") or "", scope.get("match") or "", scope["folder"]]
    return b"pacerelle/v1/grant-signature\x01" + b"".join(field(t) for t in texts)

def same_scope(a, b):
    return all(a.get(k) == b.get(k) for k in ("tool", "command", "match", "folder"))  # null is absent

def check_grant(agent_id, g, digest, offer, key):  # the agent's check of §4.8b, steps g7 to g11; key: 32 bytes or None
    s, granted_at, expires_at = g["grant"], when(g["grantedAt"]), when(g["grant"]["expiresAt"])
    check("g7", offer is not None, "the grant's question offered no grant")
    check("g8", any(same_scope(o, s["scope"]) for o in offer["scopes"]), "the grant's scope is not one its question offered")
    check("g9", s["policy"] == offer["policy"], "the grant names another policy than its question's offer")
    check("g10", 0 < expires_at - granted_at <= max(offer["durations"], default=0) * 1000,
          "the grant lasts longer than its question offered, or ends before it starts")
    check("g11", key is not None, "the granting device has no signing key")
    try:
        Ed25519PublicKey.from_public_bytes(key).verify(
            b64url(s["signature"]) or b"", grant_bytes(agent_id, g, digest, granted_at, expires_at))
    except (InvalidSignature, ValueError):
        raise Fail("step g11: the grant's signature does not verify")

def verify_grant(export, g):
    r = next((r for r in export["records"] if r["questionId"] == g["id"]), None)
    check("g1", r is not None, "the grant's question is not a record of the export")
    check("g2", r["deviceId"] == g["deviceId"], "the grant's device is not the device that answered its question")
    check("g3", r["answer"]["type"] == "yes", "the grant's question was not answered yes")
    granted_at, expires_at = when(g["grantedAt"]), when(g["grant"]["expiresAt"])
    check("g4", granted_at == when(r["answeredAt"]), "grantedAt is not the record's answeredAt")
    raw = b64url(g["question"])
    check("g5", raw is not None and base64.urlsafe_b64encode(hashlib.sha256(raw).digest()).rstrip(b"=").decode()
          == r["questionDigest"], "the grant's question is not its record's question bytes")
    device = next(d for d in export["devices"] if d["deviceId"] == g["deviceId"])  # the record's: it verified
    live = lambda t: device.get("revokedAt") is None or t < when(device["revokedAt"])
    check("g6", device["role"] == "owner" and live(granted_at), "the granting device is not an owner, or was revoked by then")
    check_grant(export["agentId"], g, r["questionDigest"], read_question(raw).get("grants"), b64url(device["signingKey"]))
    for m, u in enumerate(g["uses"], start=1):
        at = when(u["at"])
        try:
            check("u1", at >= granted_at, "the use is dated before the grant was given")
            check("u2", at < expires_at, "the use is dated at or after the grant's expiry")
            check("u3", covers(g["grant"]["scope"], u["tool"], u.get("command"), u.get("paths", []), u["folder"]),
                  "the use is not covered by the grant's scope (its tool, command or folder)")
            check("u4", live(at), "the use is dated after the granting device was revoked")
        except Fail as failure:
            raise Fail(f"use {m}: {failure}")

def verify(raw):  # → the number of records; raises NotAnExport (exit 2) or Fail (exit 1)
    try:
        export = strict_json(raw)
    except ValueError as e:
        raise NotAnExport(f"step shape: not JSON as §5 reads it ({e})")
    if not shaped(export):
        raise NotAnExport("step shape: not JSON of the shape of a version 1 export")
    if export["v"] != 1 or export["format"] != "pacerelle-answer-log":
        raise NotAnExport("step 0: not a version 1 answer-log export")
    seen = set()
    for d in export["devices"]:
        if d["deviceId"] in seen:
            raise Fail(f"step 0a: the export lists a device twice in devices: {d['deviceId']}")
        seen.add(d["deviceId"])
    for n, r in enumerate(export["records"], start=1):
        try:
            verify_record(export, r)
        except Fail as failure:
            raise Fail(f"record {n} (question {r['questionId']}): {failure}")
    for n, g in enumerate(export.get("grants") or [], start=1):
        try:
            verify_grant(export, g)
        except Fail as failure:
            text = str(failure)
            raise Fail(f"grant {n} (question {g['id']}){',' if text.startswith('use ') else ':'} {text}")
    return len(export["records"])

def main(path):
    try:
        with open(path, "rb") as f:
            count = verify(f.read())
    except OSError as e:
        print(f"{path}: cannot be read ({e})", file=sys.stderr)
        return 2
    except NotAnExport as failure:
        print(f"record 0: {failure}", file=sys.stderr)
        return 2
    except Fail as failure:
        text = str(failure)
        print(text if text.startswith(("record ", "grant ")) else f"record 0: {text}", file=sys.stderr)
        return 1
    print(f"{count} record{'' if count == 1 else 's'} verif{'ies' if count == 1 else 'y'}")
    return 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1]) if len(sys.argv) == 2 else 2)
